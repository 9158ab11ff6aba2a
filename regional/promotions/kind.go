package promotions

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
)

// Kind is PROMOTION's campaigns.Kind: its tiers.
type Kind struct{ svc *Service }

// NewKind returns the promotions' kind.
func NewKind(s *Service) Kind { return Kind{svc: s} }

// Create creates a promotion and its tiers (Service.CreateCampaign).
func (k Kind) Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	return k.svc.CreateCampaign(ctx, projectID, raw)
}

// Get reads a promotion with its tiers.
func (k Kind) Get(ctx context.Context, projectID, id string) (any, error) {
	return k.svc.GetCampaign(ctx, projectID, id)
}

// Update changes a promotion's common properties.
func (k Kind) Update(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	return k.svc.UpdateCampaign(ctx, projectID, id, raw)
}

// Generate is never asked of a promotion: its tiers are not vouchers.
func (k Kind) Generate(context.Context, *async.Job, campaigns.GenerateParams) error {
	return errors.New("promotions: a PROMOTION campaign has no vouchers to generate")
}

// Drop deletes a deleted promotion's tiers, stacks and their rule
// assignments; tiers are not vouchers: it counts none.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	return k.svc.DropCampaignTiers(ctx, job.ProjectID, campaignID)
}

// Summary is a promotion's discounts given.
func (k Kind) Summary(_ context.Context, _, _ string, _ campaigns.Period, st campaigns.Stacked) (campaigns.Summary, error) {
	return campaigns.Summary{Figures: campaigns.Discounts(st)}, nil
}
