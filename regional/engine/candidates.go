package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/calc"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Tier is a promotion tier as the engine validates it.
type Tier struct {
	ID         string
	Name       string
	Banner     *string
	CampaignID string
	Discount   json.RawMessage
	Window     Window
	Hierarchy  int
	Metadata   map[string]any
	CreatedAt  *time.Time
	CategoryID string // "" for none
}

// Tiers reads promotion tiers (regional/promotions) for the requests that
// name them.
type Tiers interface {
	QueueTiersByID(b *pgx.Batch, projectID string, ids []string, out map[string]Tier)
	// StackTiers are a promotion stack's tiers in its order (404 when
	// there is no such stack).
	StackTiers(ctx context.Context, q db.Querier, projectID, stackID string) ([]string, error)
}

// Candidate is a redeemable as resolved and checked: one a request names,
// or one a qualification (regional/qualifications) offers.
type Candidate struct {
	req      Redeemable
	voucher  *vouchers.Voucher
	tier     *Tier
	card     *redemptions.CardPayment // a loyalty card paying with a reward
	campaign *campaigns.Window
	// refusal says why the redeemable is inapplicable; nil when it applies.
	refusal *Refusal
	// lines are the order's items its rules admit (nil: every item).
	lines []int
	// namesItem: its rules require a product, SKU or collection one of
	// the order's lines matches.
	namesItem bool
	// counted: a redemption counts its discount voucher last
	// (countVouchers), on a counter shard when it read it unlocked
	// (resolve's lockHeld); held is what other sessions reserve of it, and
	// readsCounts says its rules read redemption counts.
	counted     bool
	held        int64
	readsCounts bool
	// pre is what judging's Prefetched holds of the tier and its
	// campaign, when it made the candidate (Prefetched.TierCandidate).
	pre *tierObjects
}

// ObjectID is the id of what the redeemable names: the voucher's or the tier's.
func (c *Candidate) ObjectID() string {
	if c.voucher != nil {
		return c.voucher.ID
	}
	if c.tier != nil {
		return c.tier.ID
	}
	if c.card != nil {
		return c.card.Card.ID
	}
	return ""
}

// CategoryID is the category the stacking rules see the redeemable in:
// its own (a voucher's, a tier's), else its campaign's; "" for none.
func (c *Candidate) CategoryID() string {
	switch {
	case c.voucher != nil && c.voucher.CategoryID != nil:
		return *c.voucher.CategoryID
	case c.tier != nil && c.tier.CategoryID != "":
		return c.tier.CategoryID
	case c.campaign != nil:
		return c.campaign.CategoryID
	}
	return ""
}

// CampaignID is the id of the redeemable's campaign as judging read it,
// "" for none.
func (c *Candidate) CampaignID() string {
	if c.campaign != nil {
		return c.campaign.ID
	}
	return ""
}

// discount is what the redeemable applies: a voucher's or a tier's discount.
func (c *Candidate) discount() json.RawMessage {
	if c.tier != nil {
		return c.tier.Discount
	}
	if c.voucher != nil {
		return c.voucher.Attrs.Discount
	}
	return nil
}

// Qualifications (regional/qualifications) find their candidates
// themselves (a customer's wallet, the active tiers) and have the engine
// judge them and compute their effects as a validation does, so that what
// a qualification offers validates as it says.

// VoucherCandidate is a voucher (a discount voucher, a gift card) offered
// by its code.
func VoucherCandidate(v *vouchers.Voucher) *Candidate {
	return &Candidate{req: Redeemable{Object: "voucher", ID: v.Code}, voucher: v}
}

// CardCandidate is a loyalty card offered to pay with its reward.
func CardCandidate(p *redemptions.CardPayment) *Candidate {
	return &Candidate{req: Redeemable{Object: "voucher", ID: p.Card.Code, Reward: &RewardRequest{ID: &p.RewardID}}, card: p}
}

// TierCandidate is a promotion tier offered without a code.
func TierCandidate(t *Tier) *Candidate {
	return &Candidate{req: Redeemable{Object: "promotion_tier", ID: t.ID}, tier: t}
}

// Redeemable is the candidate as a request would name it.
func (c *Candidate) Redeemable() Redeemable { return c.req }

// Voucher is the candidate's voucher; nil for a tier or a card.
func (c *Candidate) Voucher() *vouchers.Voucher { return c.voucher }

// Tier is the candidate's promotion tier; nil for a voucher or a card.
func (c *Candidate) Tier() *Tier { return c.tier }

// Card is the candidate's loyalty card and the reward it pays with; nil
// for a voucher or a tier.
func (c *Candidate) Card() *redemptions.CardPayment { return c.card }

// Campaign is the candidate's campaign as judging read it; nil for none.
func (c *Candidate) Campaign() *campaigns.Window { return c.campaign }

// Refusal says why the candidate does not apply; nil when it does.
func (c *Candidate) Refusal() *Refusal { return c.refusal }

// NamesItem says whether the candidate's rules require a product, SKU or
// collection one of the order's lines matches (qualifications' PRODUCTS).
func (c *Candidate) NamesItem() bool { return c.namesItem }

// DiscountsItems says whether the candidate's discount is for specific
// items of the order: an item-level effect on the lines its rules'
// applicable_to admit (not every line), or free units of a product or SKU
// one of the order's lines holds.
func (c *Candidate) DiscountsItems(o *orders.Request) bool {
	return calc.DiscountsItems(c.discount(), c.lines, o)
}

// Prefetched is what a caller read for judging already and judging does
// not read again (qualifications' catalogue): campaigns' windows by id,
// and the rules assigned to objects by id, Known holding every object
// read, with rules or without.
type Prefetched struct {
	Windows map[string]campaigns.Window
	Rules   map[string][]string
	Known   map[string]bool
	// Segments are the request's customer's, when Screen read them
	// (SegmentsRead): a request's own copy, not the catalogue's.
	Segments     []string
	SegmentsRead bool
	objects      map[string]preObject // by Intern
	tiers        []tierObjects        // by Intern, in its tiers' order
}

// Screen is which of idx's entries (qualifications' tiers, each with its
// own and its campaign's rules) may pass their rules for the order, the
// customer and meta under scope, as judging would read them: those it
// leaves out cannot (rules.Index), so that judging reads and runs the
// rules of the others only. The customer's segments, read when the index
// needs them, are kept in pre for judging.
func (e *Engine) Screen(ctx context.Context, projectID string, order *orders.Request, meta map[string]any,
	cust *customers.Customer, idx *rules.Index, now time.Time, scope rules.Scope, pre *Prefetched) ([]int, error) {
	in := rules.Input{Order: ruleOrder(order), Now: now, Metadata: meta, Scope: scope}
	if err := in.Order.Check(); err != nil {
		return nil, err
	}
	if cust != nil {
		in.Customer = &rules.Customer{ID: cust.ID, Metadata: cust.Attrs.Metadata}
		if cust.SourceID != nil {
			in.Customer.SourceID = *cust.SourceID
		}
		if e.Segments != nil && idx.ReadsSegments(scope) {
			segs, err := e.Segments.Of(ctx, e.pool, projectID, *cust)
			if err != nil {
				return nil, err
			}
			in.Customer.Segments, pre.Segments, pre.SegmentsRead = segs, segs, true
		}
	}
	return idx.Candidates(&in), nil
}

// Judge checks candidates as a validation checks its redeemables (outside
// any session), taking what pre holds and reading the rest, and reading of
// the rules' conditions those scope names; a refused one carries its
// refusal.
func (e *Engine) Judge(ctx context.Context, projectID string, order *orders.Request, meta map[string]any,
	cust *customers.Customer, cs []*Candidate, now time.Time, pre *Prefetched, scope rules.Scope) error {
	return e.judgeWith(ctx, e.pool, projectID, order, meta, cust, cs, "", now, pre, scope)
}

// Effects applies cs to the order in turn, as a validation does, and
// returns the order after them all and each one's effect. Without views
// the effects carry their amounts alone and the order is nil: cheaper,
// for comparing them.
func (e *Engine) Effects(ctx context.Context, projectID string, o *orders.Request, cs []*Candidate,
	views bool) (*calc.OrderView, []calc.Effect, error) {
	return e.recalcViews(ctx, e.pool, projectID, o, cs, views)
}

// EffectViews are each candidate's effect on o, in turn, with its order
// rendered, but not the order after them all: a qualification shows an
// offer's effect alone, and rendering the order twice for each offer of a
// page was a tenth of it.
func (e *Engine) EffectViews(ctx context.Context, projectID string, o *orders.Request, cs []*Candidate) ([]calc.Effect, error) {
	_, effects, _, err := e.stack(ctx, e.pool, projectID, o, cs, calc.Options{Views: true, Limit: len(cs), NoFinal: true})
	return effects, err
}
