package vouchers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/webhooks"
)

const maxVouchers = 1_000_000

// Template is the voucher a campaign makes.
type Template struct {
	Type       string          `json:"type"`
	Discount   json.RawMessage `json:"discount,omitempty"`
	Gift       *GiftFigures    `json:"gift,omitempty"`
	CodeConfig codes.Config    `json:"code_config"`
	Redemption struct {
		Quantity *int64 `json:"quantity"`
	} `json:"redemption"`
	IsReferralCode bool `json:"is_referral_code"`
}

// CampaignAttrs are a discount or gift campaign's properties kept as a
// document, in the shape loyalty programs keep theirs.
type CampaignAttrs = campaigns.Attrs[Template]

// Campaign is a discount, gift or referral campaign: a row of the one
// campaign model with this package's voucher template.
type Campaign = campaigns.Campaign[Template]

// voucher is a new voucher of the campaign, as its template says.
func (t Template) voucher(c Campaign, code string, now time.Time) Voucher {
	a := c.Attrs
	v := Voucher{Code: code, CampaignID: &c.ID, CampaignName: &c.Name, Type: t.Type, Active: true, Category: a.Category,
		CategoryID: a.CategoryID, Quantity: t.Redemption.Quantity, CreatedAt: now,
		Attrs: Attrs{Discount: t.Discount, StartDate: a.StartDate, ExpirationDate: a.ExpirationDate,
			ValidityTimeframe: a.ValidityTimeframe, ValidityDayOfWeek: a.ValidityDayOfWeek, ValidityHours: a.ValidityHours}}
	if t.Gift != nil {
		g := *t.Gift
		v.Attrs.Gift = &g
	}
	// A campaign that uses the voucher metadata schema (the reference's
	// use_voucher_metadata_schema) holds its vouchers' metadata: each
	// voucher carries a copy, as the schema checked it on the campaign.
	if a.UseVoucherMetadataSchema && len(a.Metadata) > 0 {
		v.Attrs.Metadata = maps.Clone(a.Metadata)
	}
	return v
}

// checkGenerated refuses a campaign whose generated vouchers the
// project's voucher metadata schema would refuse (a required key they
// lack, say): 400 metadata_validation_failed naming the keys, checked
// before any is made, so that none is ever generated broken.
func (s *Service) checkGenerated(ctx context.Context, projectID string, c Campaign) error {
	err := s.CheckMetadata(ctx, projectID, c.Attrs.Voucher.voucher(c, "", time.Time{}).Attrs.Metadata)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Key == "metadata_validation_failed" {
		e := *ae
		e.Details = "the campaign's vouchers would break the project's voucher metadata schema (give their metadata " +
			"as the campaign's, with use_voucher_metadata_schema true): " + ae.Details
		return &e
	}
	return err
}

// CampaignView is the reference's campaign shape, the one loyalty programs
// have, with this package's voucher template.
type CampaignView = campaigns.View[Template]

// CampaignRequest is the body of POST /v1/campaigns for the types of this package.
type CampaignRequest struct {
	campaigns.CreateRequest
	Voucher  *Request        `json:"voucher"`
	Metadata json.RawMessage `json:"metadata"`
	// ReferralProgram is a REFERRAL_PROGRAM's conversion and rewards, as
	// regional/referrals checked them: it creates its campaigns through here.
	ReferralProgram json.RawMessage `json:"-"`
}

// CampaignTypes are the campaign types whose vouchers this package makes.
var CampaignTypes = []string{"DISCOUNT_COUPONS", "GIFT_VOUCHERS", "REFERRAL_PROGRAM"}

// campaign finds a live campaign of this package's types by id or name.
func (s *Service) campaign(ctx context.Context, q db.Querier, projectID, idOrName string, lock bool) (Campaign, error) {
	c, err := campaigns.Get[Template](ctx, q, projectID, idOrName, lock, CampaignTypes...)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, apierr.NotFound("campaign", idOrName)
	}
	return c, err
}

// CampaignShared is CampaignIn share-locked (campaigns.GetShared): for
// writers that add vouchers to it, who take no turns on its row.
func (s *Service) CampaignShared(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := campaigns.GetShared[Template](ctx, q, projectID, idOrName, CampaignTypes...)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, apierr.NotFound("campaign", idOrName)
	}
	return c, err
}

// GetCampaign returns a discount or gift campaign by id or name.
func (s *Service) GetCampaign(ctx context.Context, projectID, idOrName string) (CampaignView, error) {
	c, err := s.campaign(ctx, s.pool, projectID, idOrName, false)
	if err != nil {
		return CampaignView{}, err
	}
	return c.ViewOf(), nil
}

// CreateCampaign creates a DISCOUNT_COUPONS, GIFT_VOUCHERS or
// REFERRAL_PROGRAM campaign (whose codes are referral codes) and its
// vouchers: one in the request, the rest by the async action. after, when
// not nil, runs in the transaction, after campaign.created: what hangs off
// the campaign (a referral program's tiers) is announced after it.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, r CampaignRequest,
	after func(ctx context.Context, tx pgx.Tx, c Campaign) error) (_ CampaignView, err error) {
	ctx, span := tracer.Start(ctx, "vouchers.CreateCampaign")
	defer telemetry.End(span, &err)
	c, err := r.campaign(s.now())
	if err != nil {
		return CampaignView{}, err
	}
	gen, err := codes.New(c.Attrs.Voucher.CodeConfig)
	if err != nil {
		return CampaignView{}, err
	}
	if c.VouchersCount < 0 || c.VouchersCount > maxVouchers {
		return CampaignView{}, apierr.InvalidPayload(fmt.Sprintf("vouchers_count must be from 0 to %d", maxVouchers))
	}
	if err := gen.Check(c.VouchersCount); err != nil {
		return CampaignView{}, err
	}
	var actionID *string
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		actionID, c.GenerationStatus = nil, "DONE"
		if c.VouchersCount > 1 {
			c.GenerationStatus = "IN_PROGRESS"
		}
		if err := campaigns.Insert(ctx, s.camps, tx, projectID, &c, r.Category, r.CategoryID); err != nil {
			return err
		}
		// After the campaign's own metadata is checked; an AUTO_UPDATE
		// campaign makes vouchers as it publishes them.
		if c.VouchersCount > 0 || c.Attrs.Type == "AUTO_UPDATE" {
			if err := s.checkGenerated(ctx, projectID, c); err != nil {
				return err
			}
		}
		if c.VouchersCount >= 1 {
			if _, err := generateVouchers(ctx, tx, projectID, c, gen.Next, 1, c.CreatedAt); err != nil {
				return err
			}
		}
		if c.VouchersCount > 1 {
			act, err := async.StartJob(ctx, tx, projectID, campaigns.GenerateJob, campaigns.GenerateParams{CampaignID: c.ID, Count: c.VouchersCount - 1})
			if err != nil {
				return err
			}
			actionID = &act.ID
		}
		if err := s.camps.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: campaigns.EventCreated, Entity: c.ID,
			Object: c.ViewOf()}); err != nil {
			return err
		}
		if after != nil {
			return after(ctx, tx, c)
		}
		return nil
	})
	if err != nil {
		return CampaignView{}, err
	}
	v := c.ViewOf()
	v.AsyncActionID = actionID
	return v, nil
}

// campaign checks the request and makes the campaign it asks for (not yet
// written, its category not yet resolved).
func (r CampaignRequest) campaign(now time.Time) (Campaign, error) {
	c, err := campaigns.New[Template](r.CreateRequest, firstOf(r.CampaignType), now)
	if err != nil {
		return Campaign{}, err
	}
	if err := textOK("description", r.Description, 1000); err != nil {
		return Campaign{}, err
	}
	vtype := ""
	switch t := firstOf(r.CampaignType); t {
	case "DISCOUNT_COUPONS":
		vtype = Discount
	case "GIFT_VOUCHERS":
		vtype = Gift
	case "REFERRAL_PROGRAM":
		vtype = Discount
		if !present(r.ReferralProgram) {
			return Campaign{}, apierr.InvalidPayload("referral_program is required: how referees convert and what they earn")
		}
		c.Attrs.ReferralProgram = r.ReferralProgram
	default:
		return Campaign{}, apierr.InvalidPayload("campaign_type must be DISCOUNT_COUPONS, GIFT_VOUCHERS or REFERRAL_PROGRAM here")
	}
	a := &c.Attrs
	// The campaign's own properties, checked as a voucher's are.
	probe := Voucher{Type: vtype}
	own := Request{ValidityTimeframe: r.ValidityTimeframe, ValidityDayOfWeek: r.ValidityDayOfWeek, ValidityHours: r.ValidityHours,
		StartDate: r.StartDate, ExpirationDate: r.ExpirationDate, Metadata: r.Metadata, Category: r.Category, CategoryID: r.CategoryID}
	if vtype == Discount {
		probe.Attrs.Discount = json.RawMessage(`{}`)
	} else {
		probe.Attrs.Gift = &GiftFigures{}
	}
	if err := own.apply(&probe, true); err != nil {
		return Campaign{}, err
	}
	a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours = probe.Attrs.ValidityTimeframe, probe.Attrs.ValidityDayOfWeek, probe.Attrs.ValidityHours
	a.StartDate, a.ExpirationDate, a.Metadata = probe.Attrs.StartDate, probe.Attrs.ExpirationDate, probe.Attrs.Metadata
	if a.Voucher, err = r.template(vtype, c.CampaignType); err != nil {
		return Campaign{}, err
	}
	return c, nil
}

// template checks the request's voucher, the template of the campaign's
// vouchers of type vtype.
func (r CampaignRequest) template(vtype, campaignType string) (Template, error) {
	t := Template{Type: vtype, IsReferralCode: campaignType == "REFERRAL_PROGRAM"}
	if r.Voucher == nil {
		return t, apierr.InvalidPayload("voucher is required: the template of the campaign's vouchers")
	}
	vr := *r.Voucher
	if vr.Type != nil && *vr.Type != vtype {
		return t, apierr.InvalidPayload(fmt.Sprintf("voucher.type must be %s in a %s campaign", vtype, campaignType))
	}
	var err error
	if vtype == Discount {
		if !present(vr.Discount) {
			return t, apierr.InvalidPayload("voucher.discount is required")
		}
		if t.Discount, err = CheckDiscount(vr.Discount, "voucher.discount"); err != nil {
			return t, err
		}
	} else {
		if !present(vr.Gift) {
			return t, apierr.InvalidPayload("voucher.gift is required: voucher.gift.amount in cents")
		}
		if t.Gift, err = checkGift(vr.Gift, "voucher.gift"); err != nil {
			return t, err
		}
	}
	if vr.Redemption != nil {
		if q := vr.Redemption.Quantity; q != nil && (*q < 1 || *q > 1_000_000_000) {
			return t, apierr.InvalidPayload("voucher.redemption.quantity must be from 1 to 1000000000, or null for no limit")
		}
		t.Redemption.Quantity = vr.Redemption.Quantity
	}
	if vr.CodeConfig != nil {
		t.CodeConfig = *vr.CodeConfig
	}
	return t, nil
}

// GenerateVouchers is CAMPAIGN.VOUCHERS_GENERATE for this package's
// campaigns: it makes the vouchers its request counted, 10,000 a
// transaction (campaigns.RunGeneration: a rerun after a crash makes only
// the rest).
func (s *Service) GenerateVouchers(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	return campaigns.Generate(ctx, s.pool, job, p, func(ctx context.Context) (campaigns.Generation, error) {
		c, err := s.campaign(ctx, s.pool, job.ProjectID, p.CampaignID, false)
		if err == nil {
			// The schema may have changed since the request was checked.
			err = s.checkGenerated(ctx, job.ProjectID, c)
		}
		now := s.now()
		return campaigns.Generation{Codes: c.Attrs.Voucher.CodeConfig, Count: c.VouchersCount,
			Held: func(ctx context.Context) (int64, error) { return countVouchers(ctx, s.pool, job.ProjectID, c.ID) },
			Make: func(ctx context.Context, tx pgx.Tx, gen codes.Generator, n int64) (int64, error) {
				return generateVouchers(ctx, tx, job.ProjectID, c, gen.Next, n, now)
			}}, err
	})
}

// AddVouchers adds n vouchers to a campaign: one at once (its voucher
// answered), more by the async action (its id answered). code, when
// given, is the one voucher's code; r overrides the template's
// properties for a single voucher.
func (s *Service) AddVouchers(ctx context.Context, projectID, campaignKey, code string, n int64, r Request) (any, bool, error) {
	if n < 1 || n > maxVouchers {
		return nil, false, apierr.InvalidQuery("vouchers_count", fmt.Sprintf("must be from 1 to %d", maxVouchers))
	}
	if n == 1 || code != "" {
		if n != 1 {
			return nil, false, apierr.InvalidQuery("vouchers_count", "a voucher with a given code is one voucher")
		}
		r.Campaign, r.CampaignID = nil, &campaignKey
		v, err := s.Create(ctx, projectID, code, r)
		return v, false, err
	}
	var actionID string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := s.campaign(ctx, tx, projectID, campaignKey, true)
		if err != nil {
			return err
		}
		gen, err := codes.New(c.Attrs.Voucher.CodeConfig)
		if err != nil {
			return err
		}
		if err := gen.Check(c.VouchersCount + n); err != nil {
			return err
		}
		if err := s.checkGenerated(ctx, projectID, c); err != nil {
			return err
		}
		if err := campaigns.SetGenerationStatus(ctx, tx, projectID, c.ID, "IN_PROGRESS", n); err != nil {
			return err
		}
		act, err := async.StartJob(ctx, tx, projectID, campaigns.GenerateJob, campaigns.GenerateParams{CampaignID: c.ID, Count: n})
		if err != nil {
			return err
		}
		actionID = act.ID
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return map[string]string{"async_action_id": actionID}, true, nil
}

// DropCampaignVouchers deletes a deleted campaign's vouchers for good,
// with their codes and ledger entries, 5,000 a transaction (a rerun after
// a crash deletes the rest): CAMPAIGN.VOUCHERS_DELETE's part for this
// package's campaigns. It answers how many it deleted.
func (s *Service) DropCampaignVouchers(ctx context.Context, projectID, campaignID string) (int64, error) {
	var deleted int64
	for {
		var n int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = dropVouchers(ctx, tx, projectID, campaignID, 5000)
			return err
		})
		if err != nil || n == 0 {
			return deleted, err
		}
		deleted += n
	}
}

// TemplateUpdate is the voucher-template part of PUT /v1/campaigns/{id} for
// this package's campaigns: a discount campaign's discount, a gift
// campaign's gift. Vouchers made from then on take it.
type TemplateUpdate struct {
	Discount json.RawMessage `json:"discount"`
	Gift     json.RawMessage `json:"gift"`
}

// Apply checks u and writes it into t.
func (u TemplateUpdate) Apply(t *Template) error {
	var err error
	switch {
	case present(u.Discount) && t.Type != Discount:
		return apierr.InvalidPayload("discount applies to discount and referral campaigns; this campaign's vouchers are " + t.Type)
	case present(u.Gift) && t.Type != Gift:
		return apierr.InvalidPayload("gift applies to gift card campaigns; this campaign's vouchers are " + t.Type)
	case present(u.Discount):
		t.Discount, err = CheckDiscount(u.Discount, "discount")
	case present(u.Gift):
		t.Gift, err = checkGift(u.Gift, "gift")
	}
	return err
}

// GiftCampaignID is the id of the GIFT_VOUCHERS campaign idOrName names,
// or its 404: the exports of a gift campaign's transactions (its cards'
// credits are in the ledger's table, as loyalty points are).
func (s *Service) GiftCampaignID(ctx context.Context, projectID, idOrName string) (string, error) {
	c, err := s.campaign(ctx, s.pool, projectID, idOrName, false)
	if err != nil {
		return "", err
	}
	if c.CampaignType != "GIFT_VOUCHERS" {
		return "", apierr.NotFound("campaign", idOrName)
	}
	return c.ID, nil
}

// GiftCardID is the id of the gift card code names (its code or id), or
// its 404: the exports of a gift card's transactions.
func (s *Service) GiftCardID(ctx context.Context, projectID, code string) (string, error) {
	v, err := getVoucher(ctx, s.pool, projectID, code, false)
	if err != nil {
		return "", err
	}
	if v.Type != "GIFT_VOUCHER" {
		return "", apierr.NotFound("voucher", code)
	}
	return v.ID, nil
}
