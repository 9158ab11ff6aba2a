package campaign

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Kind is the campaigns.Kind of DISCOUNT_COUPONS or GIFT_VOUCHERS: their
// vouchers (and, through it, REFERRAL_PROGRAM's codes, regional/referrals).
type Kind struct {
	svc  *Service
	gift bool
}

// NewKind returns the kind of campaignType, DISCOUNT_COUPONS or
// GIFT_VOUCHERS (REFERRAL_PROGRAM's codes are discount vouchers).
func NewKind(s *Service, campaignType string) Kind {
	return Kind{svc: s, gift: campaignType == "GIFT_VOUCHERS"}
}

// Create creates a discount or gift campaign from POST /v1/campaigns' body.
func (k Kind) Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	var r Request
	if err := campaigns.Decode(raw, &r); err != nil {
		return nil, err
	}
	return k.svc.Create(ctx, projectID, r, nil)
}

// Get reads a discount, gift or referral campaign.
func (k Kind) Get(ctx context.Context, projectID, id string) (any, error) {
	return k.svc.Get(ctx, projectID, id)
}

// Update changes a discount or gift campaign: the common properties and
// the voucher template.
func (k Kind) Update(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	var r struct {
		campaigns.CommonUpdate
		TemplateUpdate
	}
	if err := campaigns.Decode(raw, &r); err != nil {
		return nil, err
	}
	c, err := campaigns.Change(ctx, k.svc.camps, projectID, id, campaigns.EventUpdated, vouchers.CampaignTypes,
		func(_ pgx.Tx, c *vouchers.Campaign) error {
			if err := campaigns.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
				return err
			}
			return r.TemplateUpdate.Apply(&c.Attrs.Voucher)
		})
	if err != nil {
		return nil, err
	}
	return c.ViewOf(), nil
}

// Generate makes the vouchers a CAMPAIGN.VOUCHERS_GENERATE job counted.
func (k Kind) Generate(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	return k.svc.Generate(ctx, job, p)
}

// Drop deletes a deleted campaign's vouchers for good.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	return k.svc.vs.DropCampaignVouchers(ctx, job.ProjectID, campaignID)
}

// Summary is a voucher campaign's figures: its vouchers made, and the
// discounts given (discount and referral campaigns) or the credits moved
// (gift campaigns).
func (k Kind) Summary(ctx context.Context, projectID, campaignID string, p campaigns.Period, st campaigns.Stacked) (campaigns.Summary, error) {
	out := campaigns.Summary{Vouchers: true}
	var err error
	if out.VouchersCreated, err = vouchers.CountOfCampaignWithin(ctx, k.svc.pool, projectID, campaignID, p); err != nil {
		return out, err
	}
	if !k.gift {
		out.Figures = campaigns.Discounts(st)
		return out, nil
	}
	sums, err := loyalty.LedgerSums(ctx, k.svc.pool, projectID, campaignID, p)
	if err != nil {
		return out, err
	}
	out.Figures = map[string]any{"created_vouchers_amount": sums[loyalty.Opening], "amount_added": sums[loyalty.CreditsAddition],
		"amount_subtracted": -sums[loyalty.CreditsRemoval], "amount_deleted": 0, "amount_redeemed": st.GiftRedeemed,
		"amount_rolledback": st.GiftRolledBack}
	return out, nil
}
