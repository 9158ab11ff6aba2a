package program

import (
	"context"
	"fmt"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/telemetry"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/loyalty/expiry"
	"github.com/tallyhq/tally/regional/webhooks"
)

// CreateRequest is the body of POST /v1/loyalties.
type CreateRequest struct {
	campaigns.CreateRequest
	Voucher  *voucherRequest `json:"voucher"`
	Metadata map[string]any  `json:"metadata"`
}

type voucherRequest struct {
	Type        *string        `json:"type"`
	LoyaltyCard *cardRequest   `json:"loyalty_card"`
	Redemption  map[string]any `json:"redemption"`
	CodeConfig  *codes.Config  `json:"code_config"`
}

type cardRequest struct {
	Points          *int64        `json:"points"`
	ExpirationRules *expiry.Rules `json:"expiration_rules"`
}

const maxCards = 1_000_000

// CreateCampaign creates a loyalty program and its cards: one in the
// request, more by the CAMPAIGN.VOUCHERS_GENERATE async action.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, r CreateRequest) (_ loyalty.CampaignView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.CreateCampaign")
	defer telemetry.End(span, &err)
	now := s.cards.Now()
	c := loyalty.Campaign{}
	if c.Campaign, err = campaigns.New[loyalty.VoucherConfig](r.CreateRequest, "LOYALTY_PROGRAM", now); err != nil {
		return loyalty.CampaignView{}, err
	}
	if r.CampaignType != nil && *r.CampaignType != "LOYALTY_PROGRAM" {
		return loyalty.CampaignView{}, apierr.InvalidPayload("campaign_type must be LOYALTY_PROGRAM")
	}
	if r.JoinOnce != nil && !*r.JoinOnce {
		return loyalty.CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	a := &c.Attrs
	a.JoinOnce, a.Metadata, a.StartDate, a.ExpirationDate = true, r.Metadata, r.StartDate, r.ExpirationDate
	a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours = r.ValidityTimeframe, r.ValidityDayOfWeek, r.ValidityHours
	a.Voucher = loyalty.VoucherConfig{Type: "LOYALTY_CARD", Redemption: map[string]any{"quantity": nil}}
	if a.StartDate != nil && a.ExpirationDate != nil && !a.ExpirationDate.After(*a.StartDate) {
		return loyalty.CampaignView{}, apierr.InvalidPayload("expiration_date must be after start_date")
	}
	if v := r.Voucher; v != nil {
		if v.Type != nil && *v.Type != "LOYALTY_CARD" {
			return loyalty.CampaignView{}, apierr.InvalidPayload("voucher.type must be LOYALTY_CARD")
		}
		if v.LoyaltyCard != nil {
			if p := v.LoyaltyCard.Points; p != nil {
				if *p < 0 || *p > 1_000_000_000 {
					return loyalty.CampaignView{}, apierr.InvalidPayload("voucher.loyalty_card.points must be from 0 to 1000000000")
				}
				a.Voucher.LoyaltyCard.Points = *p
			}
			if err := expiry.Check(v.LoyaltyCard.ExpirationRules); err != nil {
				return loyalty.CampaignView{}, err
			}
			a.Voucher.LoyaltyCard.ExpirationRules = v.LoyaltyCard.ExpirationRules
		}
		if v.Redemption != nil {
			a.Voucher.Redemption = v.Redemption
		}
		if v.CodeConfig != nil {
			a.Voucher.CodeConfig = *v.CodeConfig
		}
	}
	gen, err := codes.New(a.Voucher.CodeConfig)
	if err != nil {
		return loyalty.CampaignView{}, err
	}
	count := c.VouchersCount
	if count < 0 || count > maxCards {
		return loyalty.CampaignView{}, apierr.InvalidPayload(fmt.Sprintf("vouchers_count must be from 0 to %d", maxCards))
	}
	if err := gen.Check(count); err != nil {
		return loyalty.CampaignView{}, err
	}
	var actionID *string
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c.GenerationStatus, actionID = "DONE", nil
		if count > 1 {
			c.GenerationStatus = "IN_PROGRESS"
		}
		if err := campaigns.Insert(ctx, s.camps, tx, projectID, &c.Campaign, r.Category, r.CategoryID); err != nil {
			return err
		}
		if count == 1 {
			if _, err := s.cards.MakeCards(ctx, tx, projectID, c, gen, 1, now); err != nil {
				return err
			}
		} else if count > 1 {
			act, err := async.StartJob(ctx, tx, projectID, campaigns.GenerateJob, campaigns.GenerateParams{CampaignID: c.ID, Count: count})
			if err != nil {
				return err
			}
			actionID = &act.ID
		}
		return s.camps.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: campaigns.EventCreated, Entity: c.ID, Object: c.View()})
	})
	if err != nil {
		return loyalty.CampaignView{}, err
	}
	v := c.View()
	v.AsyncActionID = actionID
	return v, nil
}

// GetCampaign returns a campaign by id or name.
func (s *Service) GetCampaign(ctx context.Context, projectID, idOrName string) (loyalty.CampaignView, error) {
	c, err := s.cards.Campaign(ctx, s.pool, projectID, idOrName)
	if err != nil {
		return loyalty.CampaignView{}, err
	}
	return c.View(), nil
}

// ListCampaigns returns a page of campaigns in id (creation) order.
func (s *Service) ListCampaigns(ctx context.Context, projectID string, lq listq.Query) ([]loyalty.CampaignView, int, bool, string, error) {
	cs, total, err := campaigns.List[loyalty.VoucherConfig](ctx, s.pool, projectID, []string{"LOYALTY_PROGRAM"}, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(cs, lq.Limit, func(c campaigns.Campaign[loyalty.VoucherConfig]) string { return c.ID },
		campaigns.Campaign[loyalty.VoucherConfig].ViewOf)
	return out, total, more, next, nil
}

// UpdateRequest is the body of PUT /v1/loyalties/{campaignId}: the
// properties present are replaced.
type UpdateRequest struct {
	campaigns.CommonUpdate
	LoyaltyCard *cardRequest `json:"loyalty_card"`
}

// UpdateCampaign changes a campaign's properties.
func (s *Service) UpdateCampaign(ctx context.Context, projectID, idOrName string, r UpdateRequest) (loyalty.CampaignView, error) {
	if r.JoinOnce != nil && !*r.JoinOnce {
		return loyalty.CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	if r.LoyaltyCard != nil {
		if err := expiry.Check(r.LoyaltyCard.ExpirationRules); err != nil {
			return loyalty.CampaignView{}, err
		}
		if r.LoyaltyCard.Points != nil {
			return loyalty.CampaignView{}, apierr.InvalidPayload("loyalty_card.points applies to new campaigns only")
		}
	}
	c, err := campaigns.Change(ctx, s.camps, projectID, idOrName, campaigns.EventUpdated, []string{"LOYALTY_PROGRAM"},
		func(_ pgx.Tx, c *campaigns.Campaign[loyalty.VoucherConfig]) error {
			if err := campaigns.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
				return err
			}
			if r.LoyaltyCard != nil && r.LoyaltyCard.ExpirationRules != nil {
				c.Attrs.Voucher.LoyaltyCard.ExpirationRules = r.LoyaltyCard.ExpirationRules
			}
			return nil
		})
	if err != nil {
		return loyalty.CampaignView{}, err
	}
	return c.ViewOf(), nil
}

// DeleteCampaign removes a loyalty program at once (it and its cards
// answer 404) and deletes its cards and their ledger in the
// CAMPAIGN.VOUCHERS_DELETE async action, whose id it returns.
func (s *Service) DeleteCampaign(ctx context.Context, projectID, idOrName string) (string, error) {
	id, err := s.camps.Remove(ctx, projectID, idOrName, true, "LOYALTY_PROGRAM")
	if err != nil {
		return "", err
	}
	return *id, nil
}
