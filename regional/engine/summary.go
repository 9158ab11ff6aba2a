package engine

import (
	"context"

	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine/stacked"
)

// CampaignCounts are a campaign's stacked redemptions within a period
// (regional/engine/stacked), as its summary shows them.
type CampaignCounts = stacked.CampaignCounts

// TierSummary is a promotion tier's successful redemptions and their
// orders (regional/engine/stacked).
type TierSummary = stacked.TierSummary

// CampaignCounts counts the stacked redemptions of campaignID's vouchers
// and tiers made within p, and the rollbacks of its redemptions made
// within p.
func (e *Engine) CampaignCounts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (CampaignCounts, error) {
	return stacked.CountCampaign(ctx, e.pool, projectID, campaignID, p)
}

// TierSummaries count the standing redemptions of promotion tiers, by tier.
func (e *Engine) TierSummaries(ctx context.Context, projectID string, tierIDs []string) (map[string]TierSummary, error) {
	return stacked.SummarizeTiers(ctx, e.pool, projectID, tierIDs)
}
