package templates

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/promotions"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers/campaign"
)

// Service keeps templates and makes campaigns and tiers from them through
// their owners.
type Service struct {
	pool    *db.Pool
	clock   *clock.Clock
	vcamps  *campaign.Service
	promos  *promotions.Service
	rules   *validation.Service
	objects Objects
}

// NewService returns the templates service: discount and gift campaigns
// are read and made through vs, promotion tiers through promos, and the
// rules copied through rules; what a copy into another project carries
// is read and made through objects.
func NewService(pool *db.Pool, clk *clock.Clock, vs *campaign.Service, promos *promotions.Service, rules *validation.Service,
	objects Objects) *Service {
	return &Service{pool: pool, clock: clk, vcamps: vs, promos: promos, rules: rules, objects: objects}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// templateTypes are the campaign types a template keeps.
var templateTypes = []string{"DISCOUNT_COUPONS", "GIFT_VOUCHERS"}

// Create saves a campaign's or a promotion tier's settings under a name.
func (s *Service) Create(ctx context.Context, projectID string, r CreateRequest) (View, error) {
	if err := checkName(r.Name, true); err != nil {
		return View{}, err
	}
	t := Template{ID: ids.New("camp_tpl_"), Name: *r.Name, Description: r.Description, CreatedAt: s.now()}
	var sourceID string
	var err error
	switch {
	case r.CampaignID != nil && r.PromotionTierID != nil:
		return View{}, apierr.InvalidPayload("give one of campaign_id and promotion_tier_id, not both")
	case r.CampaignID != nil:
		sourceID, err = s.fromCampaign(ctx, projectID, *r.CampaignID, &t)
	case r.PromotionTierID != nil:
		sourceID, err = s.fromTier(ctx, projectID, *r.PromotionTierID, &t)
	default:
		return View{}, apierr.InvalidPayload("campaign_id or promotion_tier_id is required: the campaign or tier the template keeps")
	}
	if err != nil {
		return View{}, err
	}
	if t.Rules, err = s.ruleCopies(ctx, projectID, sourceID); err != nil {
		return View{}, err
	}
	return t.View(), db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return insert(ctx, tx, projectID, t) })
}

func (s *Service) fromCampaign(ctx context.Context, projectID, idOrName string, t *Template) (string, error) {
	id, typ, err := campaigns.TypeOf(ctx, s.pool, projectID, idOrName)
	if errors.Is(err, db.ErrNotFound) {
		return "", apierr.NotFound("campaign", idOrName)
	} else if err != nil {
		return "", err
	}
	if !slices.Contains(templateTypes, typ) {
		return "", unsupported("a template keeps a DISCOUNT_COUPONS or GIFT_VOUCHERS campaign or a promotion tier; " + id + " is " + typ)
	}
	c, err := s.vcamps.Get(ctx, projectID, id)
	if err != nil {
		return "", err
	}
	if t.Body, err = pick(c, campaignKeys); err != nil {
		return "", err
	}
	voucher, err := pick(c.Voucher, voucherKeys)
	if err != nil {
		return "", err
	}
	t.Body["voucher"], _ = json.Marshal(voucher)
	t.Body["campaign_type"], _ = json.Marshal(typ)
	t.CampaignType, t.Source = typ, fromCampaign
	return id, nil
}

// fromTier keeps a promotion tier; the reference shows such a template as
// DISCOUNT_COUPONS.
func (s *Service) fromTier(ctx context.Context, projectID, id string, t *Template) (string, error) {
	tier, err := s.promos.GetTier(ctx, projectID, id)
	if err != nil {
		return "", err
	}
	if t.Body, err = pick(tier, tierKeys); err != nil {
		return "", err
	}
	t.CampaignType, t.Source = "DISCOUNT_COUPONS", fromTier
	return tier.ID, nil
}

// ruleCopies are the definitions of the rules assigned to the source.
func (s *Service) ruleCopies(ctx context.Context, projectID, sourceID string) ([]map[string]json.RawMessage, error) {
	ruleIDs, err := s.rules.RulesOf(ctx, projectID, sourceID)
	if err != nil {
		return nil, err
	}
	out := []map[string]json.RawMessage{}
	for _, id := range ruleIDs {
		v, err := s.rules.Get(ctx, projectID, id)
		if err != nil {
			return nil, err
		}
		def, err := pick(v, ruleKeys)
		if err != nil {
			return nil, err
		}
		out = append(out, def)
	}
	return out, nil
}

// Get reads a template.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	t, err := get(ctx, s.pool, projectID, id)
	return t.View(), err
}

// Update renames a template or changes its description.
func (s *Service) Update(ctx context.Context, projectID, id string, r UpdateRequest) (View, error) {
	if err := checkName(r.Name, false); err != nil {
		return View{}, err
	}
	var out Template
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := get(ctx, tx, projectID, id)
		if err != nil {
			return err
		}
		if r.Name != nil {
			t.Name = *r.Name
		}
		if r.Description != nil {
			t.Description = r.Description
		}
		now := s.now()
		t.UpdatedAt = &now
		out = t
		return rename(ctx, tx, projectID, t)
	})
	return out.View(), err
}

// Delete removes a template; what was made from it stays.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return remove(ctx, tx, projectID, id) })
}

// List answers a page of the templates f lets through by id, and the
// count of all the project's templates when asked (the reference's total
// is "regardless of the applied filters").
func (s *Service) List(ctx context.Context, projectID string, lq listq.Query, f filters.Filter, withTotal bool) (listq.List[View], error) {
	ts, err := list(ctx, s.pool, projectID, lq, f, s.now())
	if err != nil {
		return listq.List[View]{}, err
	}
	page, more, next := listq.PageOf(ts, lq.Limit, func(t Template) string { return t.ID }, Template.View)
	out := listq.List[View]{Data: page, More: more, Next: next}
	if withTotal {
		n, err := count(ctx, s.pool, projectID)
		if err != nil {
			return out, err
		}
		out.Total = &n
	}
	return out, nil
}
