package referrals

import (
	"context"
	"encoding/json"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/vouchers/campaign"
)

// Kind is REFERRAL_PROGRAM's campaigns.Kind: the program checked and kept
// here, its referral codes discount vouchers (regional/vouchers).
type Kind struct {
	svc   *Service
	codes campaign.Kind
}

// NewKind returns the referral programs' kind; codes makes, drops and
// counts their codes.
func NewKind(s *Service, codes campaign.Kind) Kind { return Kind{svc: s, codes: codes} }

// Create creates a referral program (Service.CreateCampaign).
func (k Kind) Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	return k.svc.CreateCampaign(ctx, projectID, raw)
}

// Get reads a referral program.
func (k Kind) Get(ctx context.Context, projectID, id string) (any, error) {
	return k.svc.GetCampaign(ctx, projectID, id)
}

// Update changes a referral program (Service.UpdateCampaign).
func (k Kind) Update(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	return k.svc.UpdateCampaign(ctx, projectID, id, raw)
}

// Generate makes the program's codes.
func (k Kind) Generate(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	return k.codes.Generate(ctx, job, p)
}

// Drop deletes a deleted program's codes.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	return k.codes.Drop(ctx, job, campaignID)
}

// Summary is the codes' figures, and the referees the program converted
// (referred_customers).
func (k Kind) Summary(ctx context.Context, projectID, campaignID string, p campaigns.Period, st campaigns.Stacked) (campaigns.Summary, error) {
	out, err := k.codes.Summary(ctx, projectID, campaignID, p, st)
	if err != nil {
		return out, err
	}
	n, err := k.svc.ReferredCustomers(ctx, projectID, campaignID, p)
	out.Figures["referred_customers"] = n
	return out, err
}
