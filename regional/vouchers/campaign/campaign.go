package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/vouchers/campaign")

// maxVouchers is the most vouchers a campaign is made with, or given at
// once.
const maxVouchers = 1_000_000

// Service makes and changes the voucher campaigns, over vouchers'
// functions and the campaigns' rows.
type Service struct {
	pool  *db.Pool
	vs    *vouchers.Service
	camps *campaigns.Service
	clock *clock.Clock
}

// NewService returns the voucher campaigns' service: vs makes and counts
// their vouchers, camps writes their rows and raises their notices.
func NewService(pool *db.Pool, vs *vouchers.Service, camps *campaigns.Service, clk *clock.Clock) *Service {
	return &Service{pool: pool, vs: vs, camps: camps, clock: clk}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Request is the body of POST /v1/campaigns for DISCOUNT_COUPONS,
// GIFT_VOUCHERS and (through regional/referrals) REFERRAL_PROGRAM.
type Request struct {
	campaigns.CreateRequest
	Voucher  *vouchers.Request `json:"voucher"`
	Metadata json.RawMessage   `json:"metadata"`
	// ReferralProgram is a REFERRAL_PROGRAM's conversion and rewards, as
	// regional/referrals checked them: it creates its campaigns through here.
	ReferralProgram json.RawMessage `json:"-"`
}

// Get returns a discount or gift campaign by id or name.
func (s *Service) Get(ctx context.Context, projectID, idOrName string) (vouchers.CampaignView, error) {
	c, err := s.vs.Campaign(ctx, s.pool, projectID, idOrName, false)
	if err != nil {
		return vouchers.CampaignView{}, err
	}
	return c.ViewOf(), nil
}

// Create creates a DISCOUNT_COUPONS, GIFT_VOUCHERS or
// REFERRAL_PROGRAM campaign (whose codes are referral codes) and its
// vouchers: one in the request, the rest by the async action. after, when
// not nil, runs in the transaction, after campaign.created: what hangs off
// the campaign (a referral program's tiers) is announced after it.
func (s *Service) Create(ctx context.Context, projectID string, r Request,
	after func(ctx context.Context, tx pgx.Tx, c vouchers.Campaign) error) (_ vouchers.CampaignView, err error) {
	ctx, span := tracer.Start(ctx, "vouchers.campaign.Create")
	defer telemetry.End(span, &err)
	c, err := r.campaign(s.now())
	if err != nil {
		return vouchers.CampaignView{}, err
	}
	gen, err := codes.New(c.Attrs.Voucher.CodeConfig)
	if err != nil {
		return vouchers.CampaignView{}, err
	}
	if c.VouchersCount < 0 || c.VouchersCount > maxVouchers {
		return vouchers.CampaignView{}, apierr.InvalidPayload(fmt.Sprintf("vouchers_count must be from 0 to %d", maxVouchers))
	}
	if err := gen.Check(c.VouchersCount); err != nil {
		return vouchers.CampaignView{}, err
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
			if err := s.vs.CheckGenerated(ctx, projectID, c); err != nil {
				return err
			}
		}
		if c.VouchersCount >= 1 {
			if _, err := vouchers.Generate(ctx, tx, projectID, c, gen.Next, 1, c.CreatedAt); err != nil {
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
		return vouchers.CampaignView{}, err
	}
	v := c.ViewOf()
	v.AsyncActionID = actionID
	return v, nil
}

// campaign checks the request and makes the campaign it asks for (not yet
// written, its category not yet resolved).
func (r Request) campaign(now time.Time) (vouchers.Campaign, error) {
	c, err := campaigns.New[vouchers.Template](r.CreateRequest, deref(r.CampaignType), now)
	if err != nil {
		return vouchers.Campaign{}, err
	}
	if err := textOK("description", r.Description, 1000); err != nil {
		return vouchers.Campaign{}, err
	}
	vtype := ""
	switch t := deref(r.CampaignType); t {
	case "DISCOUNT_COUPONS":
		vtype = vouchers.Discount
	case "GIFT_VOUCHERS":
		vtype = vouchers.Gift
	case "REFERRAL_PROGRAM":
		vtype = vouchers.Discount
		if !present(r.ReferralProgram) {
			return vouchers.Campaign{}, apierr.InvalidPayload("referral_program is required: how referees convert and what they earn")
		}
		c.Attrs.ReferralProgram = r.ReferralProgram
	default:
		return vouchers.Campaign{}, apierr.InvalidPayload("campaign_type must be DISCOUNT_COUPONS, GIFT_VOUCHERS or REFERRAL_PROGRAM here")
	}
	a := &c.Attrs
	// The campaign's own properties, checked as a voucher's are.
	probe := vouchers.Voucher{Type: vtype}
	own := vouchers.Request{ValidityTimeframe: r.ValidityTimeframe, ValidityDayOfWeek: r.ValidityDayOfWeek, ValidityHours: r.ValidityHours,
		StartDate: r.StartDate, ExpirationDate: r.ExpirationDate, Metadata: r.Metadata, Category: r.Category, CategoryID: r.CategoryID}
	if vtype == vouchers.Discount {
		probe.Attrs.Discount = json.RawMessage(`{}`)
	} else {
		probe.Attrs.Gift = &vouchers.GiftFigures{}
	}
	if err := own.Apply(&probe, true); err != nil {
		return vouchers.Campaign{}, err
	}
	a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours = probe.Attrs.ValidityTimeframe, probe.Attrs.ValidityDayOfWeek, probe.Attrs.ValidityHours
	a.StartDate, a.ExpirationDate, a.Metadata = probe.Attrs.StartDate, probe.Attrs.ExpirationDate, probe.Attrs.Metadata
	if a.Voucher, err = r.template(vtype, c.CampaignType); err != nil {
		return vouchers.Campaign{}, err
	}
	return c, nil
}

// template checks the request's voucher, the template of the campaign's
// vouchers of type vtype.
func (r Request) template(vtype, campaignType string) (vouchers.Template, error) {
	t := vouchers.Template{Type: vtype, IsReferralCode: campaignType == "REFERRAL_PROGRAM"}
	if r.Voucher == nil {
		return t, apierr.InvalidPayload("voucher is required: the template of the campaign's vouchers")
	}
	vr := *r.Voucher
	if vr.Type != nil && *vr.Type != vtype {
		return t, apierr.InvalidPayload(fmt.Sprintf("voucher.type must be %s in a %s campaign", vtype, campaignType))
	}
	var err error
	if vtype == vouchers.Discount {
		if !present(vr.Discount) {
			return t, apierr.InvalidPayload("voucher.discount is required")
		}
		if t.Discount, err = vouchers.CheckDiscount(vr.Discount, "voucher.discount"); err != nil {
			return t, err
		}
	} else {
		if !present(vr.Gift) {
			return t, apierr.InvalidPayload("voucher.gift is required: voucher.gift.amount in cents")
		}
		if t.Gift, err = vouchers.CheckGift(vr.Gift, "voucher.gift"); err != nil {
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

// Generate is CAMPAIGN.VOUCHERS_GENERATE for this package's
// campaigns: it makes the vouchers its request counted, 10,000 a
// transaction (campaigns.RunGeneration: a rerun after a crash makes only
// the rest).
func (s *Service) Generate(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	return campaigns.Generate(ctx, s.pool, job, p, func(ctx context.Context) (campaigns.Generation, error) {
		c, err := s.vs.Campaign(ctx, s.pool, job.ProjectID, p.CampaignID, false)
		if err == nil {
			// The schema may have changed since the request was checked.
			err = s.vs.CheckGenerated(ctx, job.ProjectID, c)
		}
		now := s.now()
		return campaigns.Generation{Codes: c.Attrs.Voucher.CodeConfig, Count: c.VouchersCount,
			Held: func(ctx context.Context) (int64, error) {
				return vouchers.CountOfCampaign(ctx, s.pool, job.ProjectID, c.ID)
			},
			Make: func(ctx context.Context, tx pgx.Tx, gen codes.Generator, n int64) (int64, error) {
				return vouchers.Generate(ctx, tx, job.ProjectID, c, gen.Next, n, now)
			}}, err
	})
}

// AddRequest is POST /v1/campaigns/{campaignId}/vouchers[/{code}]: Count
// vouchers for Campaign (its id or name). Code, when given, is the one
// voucher's code; Voucher overrides the template's properties for a single
// voucher.
type AddRequest struct {
	Campaign, Code string
	Count          int64
	Voucher        vouchers.Request
}

// Validate refuses a count out of range, and a code given for more than
// one voucher.
func (a AddRequest) Validate() error {
	if a.Count < 1 || a.Count > maxVouchers {
		return apierr.InvalidQuery("vouchers_count", fmt.Sprintf("must be from 1 to %d", maxVouchers))
	}
	if a.Code != "" && a.Count != 1 {
		return apierr.InvalidQuery("vouchers_count", "a voucher with a given code is one voucher")
	}
	return nil
}

// AddVouchers adds a.Count vouchers to a campaign: one at once (its
// voucher answered), more by the async action (its id answered).
func (s *Service) AddVouchers(ctx context.Context, projectID string, a AddRequest) (any, bool, error) {
	if err := a.Validate(); err != nil {
		return nil, false, err
	}
	campaignKey, n := a.Campaign, a.Count
	if n == 1 {
		r := a.Voucher
		r.Campaign, r.CampaignID = nil, &campaignKey
		v, err := s.vs.Create(ctx, projectID, a.Code, r)
		return v, false, err
	}
	var actionID string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := s.vs.Campaign(ctx, tx, projectID, campaignKey, true)
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
		if err := s.vs.CheckGenerated(ctx, projectID, c); err != nil {
			return err
		}
		if err := campaigns.SetGenerationStatus(ctx, tx, projectID, c.ID, campaigns.GenerationInProgress, n); err != nil {
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

// TemplateUpdate is the voucher-template part of PUT /v1/campaigns/{id} for
// this package's campaigns: a discount campaign's discount, a gift
// campaign's gift. Vouchers made from then on take it.
type TemplateUpdate struct {
	Discount json.RawMessage `json:"discount"`
	Gift     json.RawMessage `json:"gift"`
}

// Apply checks u and writes it into t.
func (u TemplateUpdate) Apply(t *vouchers.Template) error {
	var err error
	switch {
	case present(u.Discount) && t.Type != vouchers.Discount:
		return apierr.InvalidPayload("discount applies to discount and referral campaigns; this campaign's vouchers are " + t.Type)
	case present(u.Gift) && t.Type != vouchers.Gift:
		return apierr.InvalidPayload("gift applies to gift card campaigns; this campaign's vouchers are " + t.Type)
	case present(u.Discount):
		t.Discount, err = vouchers.CheckDiscount(u.Discount, "discount")
	case present(u.Gift):
		t.Gift, err = vouchers.CheckGift(u.Gift, "gift")
	}
	return err
}

// CampaignTransactions returns a page of a discount or gift campaign's
// transactions; found is false when the campaign is not one of this
// package's (the handler then asks loyalty).
func (s *Service) CampaignTransactions(ctx context.Context, projectID, idOrName string, tq loyalty.TxQuery) (ts []loyalty.Transaction, more bool, next string, found bool, err error) {
	c, err := s.vs.Campaign(ctx, s.pool, projectID, idOrName, false)
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, false, "", false, nil
		}
		return nil, false, "", false, err
	}
	ts, more, next, err = loyalty.ListEntries(ctx, s.pool, loyalty.CardRef{Project: projectID, Campaign: c.ID}, tq, s.now())
	return ts, more, next, true, err
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func textOK(name string, v *string, max int) error {
	if v != nil && len(*v) > max {
		return apierr.InvalidPayload(fmt.Sprintf("%s is at most %d characters", name, max))
	}
	return nil
}
