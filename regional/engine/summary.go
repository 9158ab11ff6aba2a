package engine

import (
	"context"

	"github.com/tallyhq/tally/regional/loyalty"
)

// CampaignCounts are a campaign's stacked redemptions within a period, as
// its summary (GET /v1/campaigns/{id}/summary) shows them.
type CampaignCounts struct {
	Redemptions, Succeeded, Failed int64 // children of the campaign's vouchers and tiers
	RolledBack                     int64 // their rollbacks made within the period
	Discounted, RolledBackDiscount int64 // discount amounts redeemed, and of those rolled back
	GiftRedeemed, GiftRolledBack   int64 // gift credits taken, and of those rolled back
}

// CampaignCounts counts the stacked redemptions of campaignID's vouchers
// and tiers made within p, and the rollbacks of its redemptions made
// within p.
func (e *Engine) CampaignCounts(ctx context.Context, projectID, campaignID string, p loyalty.Period) (CampaignCounts, error) {
	var c CampaignCounts
	cond, args := p.Cond("created_at", []any{projectID, campaignID})
	err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE result = 'SUCCESS'), count(*) FILTER (WHERE result = 'FAILURE'),
		COALESCE(sum(amount) FILTER (WHERE result = 'SUCCESS'), 0), COALESCE(sum(gift_amount) FILTER (WHERE result = 'SUCCESS'), 0)
		FROM stacked_redemptions WHERE project_id = $1 AND campaign_id = $2 AND parent_id IS NOT NULL`+cond, args...).
		Scan(&c.Redemptions, &c.Succeeded, &c.Failed, &c.Discounted, &c.GiftRedeemed)
	if err != nil {
		return c, err
	}
	cond, args = p.Cond("b.created_at", []any{projectID, campaignID})
	err = e.pool.QueryRow(ctx, `SELECT count(*), COALESCE(sum(r.amount), 0), COALESCE(sum(r.gift_amount), 0)
		FROM stacked_rollbacks b JOIN stacked_redemptions r ON r.project_id = b.project_id AND r.id = b.redemption_id
		WHERE b.project_id = $1 AND r.campaign_id = $2`+cond, args...).Scan(&c.RolledBack, &c.RolledBackDiscount, &c.GiftRolledBack)
	return c, err
}
