package qualifications

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/vouchers"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/qualifications")

// Request is the body of POST /v1/qualifications.
type Request struct {
	Customer   *customers.Patch `json:"customer"`
	Order      *orders.Request  `json:"order"`
	TrackingID *string          `json:"tracking_id"`
	Scenario   *string          `json:"scenario"`
	Options    *struct {
		Limit         *int            `json:"limit"`
		StartingAfter *time.Time      `json:"starting_after"`
		SortingRule   *string         `json:"sorting_rule"`
		Expand        []string        `json:"expand"`
		Filters       json.RawMessage `json:"filters"`
	} `json:"options"`
	Metadata map[string]any         `json:"metadata"`
	Session  *engine.SessionRequest `json:"session"`
}

// WalletLimit is how many of a customer's vouchers a qualification reads.
const WalletLimit = 1000

// Service answers qualifications through the engine, which judges and
// applies what it offers.
type Service struct {
	engine *engine.Engine
	tiers  Tiers // nil: no promotion tiers or stacks to offer
	cats   catalogues
}

// New returns the service: e judges the candidates (and lends its pool,
// clock, rules and redemptions), tiers are the promotion tiers and stacks
// (regional/promotions).
func New(e *engine.Engine, tiers Tiers) *Service { return &Service{engine: e, tiers: tiers} }

// plan is a request's scenario and options, read and checked.
type plan struct {
	name    string
	sc      scenario
	limit   int
	sorting string // DEFAULT, BEST_DEAL or LEAST_DEAL
	after   *time.Time
	filter  *filter
	expand  map[string]bool
}

// Qualify is POST /v1/qualifications: which of the customer's vouchers and
// the project's promotion tiers the customer and order qualify for, each
// checked and its rules evaluated as a validation does, and each one's
// effect on the order alone. Candidates are read with two indexed queries
// (the wallet by holder, the active tiers) and judged in memory with the
// compiled rules; the scenario says which candidates, which of their
// rules' conditions are read and, for the products scenarios, which
// qualified ones relate to the order's products; options.filters narrow
// them. Sorted newest first (DEFAULT), or by the discount (BEST_DEAL,
// LEAST_DEAL); paged by starting_after, a creation time.
func (s *Service) Qualify(ctx context.Context, projectID string, r Request) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "qualifications.Qualify")
	defer telemetry.End(span, &err)
	p, err := readPlan(&r)
	if err != nil {
		return nil, err
	}
	now := s.engine.Now()
	var cust *customers.Customer
	var held *holdings
	if p.sc.scope != rules.ScopeWithoutCustomer {
		if cust, held, err = s.customer(ctx, projectID, p.sc, r.Customer); err != nil {
			return nil, err
		}
	}
	cs, pre, err := s.candidates(ctx, projectID, p.sc, &r, cust, held, now)
	if err != nil {
		return nil, err
	}
	if err := s.engine.Judge(ctx, projectID, r.Order, r.Metadata, cust, cs, now, pre, p.sc.scope); err != nil {
		return nil, err
	}
	qs, err := s.qualified(ctx, projectID, p, r.Order, cs, now)
	if err != nil {
		return nil, err
	}
	page, total, more, err := s.sortAndPage(ctx, projectID, p, r.Order, qs)
	if err != nil {
		return nil, err
	}
	if err := s.effects(ctx, projectID, r.Order, page); err != nil {
		return nil, err
	}
	return s.answer(ctx, projectID, p, &r, page, total, more)
}

// readPlan checks the request's scenario and options, and the order's
// items, which it normalizes.
func readPlan(r *Request) (plan, error) {
	p := plan{name: "ALL", limit: 5, sorting: "DEFAULT", expand: map[string]bool{}}
	if r.Scenario != nil {
		p.name = *r.Scenario
	}
	var ok bool
	if p.sc, ok = scenarios[p.name]; !ok {
		return p, apierr.InvalidPayload("scenario must be one of ALL, CUSTOMER_WALLET, AUDIENCE_ONLY, PRODUCTS, PRODUCTS_DISCOUNT, " +
			"PRODUCTS_BY_CUSTOMER, PRODUCTS_DISCOUNT_BY_CUSTOMER, PROMOTION_STACKS")
	}
	if o := r.Options; o != nil {
		if o.Limit != nil {
			if *o.Limit < 1 || *o.Limit > 50 {
				return p, apierr.InvalidPayload("options.limit must be from 1 to 50")
			}
			p.limit = *o.Limit
		}
		if o.SortingRule != nil {
			switch p.sorting = *o.SortingRule; p.sorting {
			case "DEFAULT", "BEST_DEAL", "LEAST_DEAL":
			default:
				return p, apierr.InvalidPayload("options.sorting_rule must be DEFAULT, BEST_DEAL or LEAST_DEAL")
			}
		}
		var err error
		if p.filter, err = parseFilters(o.Filters); err != nil {
			return p, err
		}
		for _, x := range o.Expand {
			switch x {
			case "redeemable", "category", "validation_rules":
				p.expand[x] = true
			default:
				return p, apierr.InvalidPayload("options.expand: " + x + " is not one of redeemable, category, validation_rules")
			}
		}
		p.after = o.StartingAfter
	}
	if r.Order != nil {
		items, err := orders.NormalizeItems(r.Order.Items)
		if err != nil {
			return p, err
		}
		r.Order.Items = items
	}
	if p.sc.products != 0 && (r.Order == nil || len(r.Order.Items) == 0) {
		return p, apierr.InvalidPayload("scenario " + p.name + " qualifies promotions for the order's products: order.items must name at least one")
	}
	return p, nil
}

// candidates are what the scenario offers, not judged yet: the customer's
// discount vouchers, gift cards and loyalty cards that can pay (held, read
// with the customer), and the project's active tiers that may pass their
// rules (from the catalogue, which judging reads their campaigns and rules
// from too).
func (s *Service) candidates(ctx context.Context, projectID string, sc scenario, r *Request, cust *customers.Customer,
	held *holdings, now time.Time) ([]*engine.Candidate, *engine.Prefetched, error) {
	var cs []*engine.Candidate
	if sc.wallet && cust != nil && cust.ID != "" && held != nil {
		for i := range held.wallet {
			if v := &held.wallet[i]; v.Type == vouchers.Discount || v.Type == vouchers.Gift {
				cs = append(cs, engine.VoucherCandidate(v))
			}
		}
		for i := range held.cards {
			cs = append(cs, engine.CardCandidate(&held.cards[i]))
		}
	}
	if !sc.tiers {
		return cs, nil, nil
	}
	cat, err := s.catalogue(ctx, s.engine.Pool, projectID, now)
	if err != nil {
		return nil, nil, err
	}
	pre := cat.Prefetched // the catalogue is shared: the request's segments go in its copy
	if cat.index == nil || fullEvaluation.Load() {
		for i := range cat.tiers {
			t := cat.tiers[i] // each candidate its own copy
			cs = append(cs, pre.TierCandidate(i, &t))
		}
		judgedTiers.Add(int64(len(cat.tiers)))
		return cs, &pre, nil
	}
	keep, err := s.engine.Screen(ctx, projectID, r.Order, r.Metadata, cust, cat.index, now, sc.scope, &pre)
	if err != nil {
		return nil, nil, err
	}
	for _, i := range keep {
		t := cat.tiers[i]
		cs = append(cs, pre.TierCandidate(i, &t))
	}
	judgedTiers.Add(int64(len(keep)))
	return cs, &pre, nil
}

// qualified are the judged candidates (or, for PROMOTION_STACKS, the
// stacks of them) that qualify, belong to the scenario's answer, pass the
// filters and come before starting_after.
func (s *Service) qualified(ctx context.Context, projectID string, p plan, o *orders.Request, cs []*engine.Candidate,
	now time.Time) ([]*offer, error) {
	var all []*offer
	if p.sc.stacks {
		var err error
		if all, err = s.qualifiedStacks(ctx, projectID, cs); err != nil {
			return nil, err
		}
	} else {
		for _, c := range cs {
			if c.Refusal() == nil && p.sc.keeps(c, o) {
				all = append(all, offerOf(c))
			}
		}
	}
	var qs []*offer
	for _, c := range all {
		if !p.filter.admits(c) {
			continue
		}
		c.at = c.createdAt(now)
		if p.after != nil && !c.at.Before(*p.after) {
			continue
		}
		qs = append(qs, c)
	}
	return qs, nil
}

// sortAndPage sorts the qualified offers and cuts the page: the deals by
// each one's discount, computed without rendering (only the page's are
// rendered); the rest newest first.
func (s *Service) sortAndPage(ctx context.Context, projectID string, p plan, o *orders.Request,
	qs []*offer) (page []*offer, total int, more bool, err error) {
	if p.sorting != "DEFAULT" {
		for _, q := range qs {
			_, effects, err := s.engine.Effects(ctx, projectID, o, q.applies(), false)
			if err != nil {
				return nil, 0, false, err
			}
			q.effect = sum(effects)
		}
	}
	sort.SliceStable(qs, func(i, j int) bool {
		switch p.sorting {
		case "BEST_DEAL":
			return qs[i].effect.Discount > qs[j].effect.Discount
		case "LEAST_DEAL":
			return qs[i].effect.Discount < qs[j].effect.Discount
		}
		return qs[i].at.After(qs[j].at)
	})
	total, more = len(qs), len(qs) > p.limit
	if !more {
		return qs, total, false, nil
	}
	// The cursor is a creation time, exclusive: a page ends before a run
	// of equal times it would split (or, when the run fills it, after the
	// run), so that the next page loses none of them.
	end := p.limit
	if p.sorting == "DEFAULT" {
		for end > 0 && qs[end-1].at.Equal(qs[end].at) {
			end--
		}
		if end == 0 {
			for end = p.limit; end < len(qs) && qs[end].at.Equal(qs[p.limit-1].at); end++ {
			}
		}
	}
	return qs[:end], total, end < len(qs), nil
}

// effects are the page's offers' effects on the order alone, rendered: a
// stack's is its tiers' results and the order after them all.
func (s *Service) effects(ctx context.Context, projectID string, o *orders.Request, page []*offer) error {
	for _, q := range page {
		if q.stack == nil {
			effects, err := s.engine.EffectViews(ctx, projectID, o, q.applies())
			if err != nil {
				return err
			}
			q.effect = effects[0]
			continue
		}
		order, effects, err := s.engine.Effects(ctx, projectID, o, q.applies(), true)
		if err != nil {
			return err
		}
		results := make([]any, len(effects))
		for k, ef := range effects {
			results[k] = map[string]any{"id": q.parts[k].Redeemable().ID, "object": "promotion_tier", "result": ef.Result}
		}
		q.effect = sum(effects)
		q.effect.Order, q.effect.Result = order, map[string]any{"promotion_tiers": results}
	}
	return nil
}

// answer renders the page with what options.expand adds, the stacking
// rules and the order as the request gave it.
func (s *Service) answer(ctx context.Context, projectID string, p plan, r *Request, page []*offer, total int,
	more bool) (map[string]any, error) {
	rules, err := s.engine.StackingRulesOf(ctx, projectID)
	if err != nil {
		return nil, err
	}
	expanded, err := s.expansions(ctx, projectID, page, p.expand, rules)
	if err != nil {
		return nil, err
	}
	data := make([]any, 0, len(page))
	for _, q := range page {
		v := q.view(p.expand["redeemable"])
		expanded(q, v)
		data = append(data, v)
	}
	list := map[string]any{"object": "list", "data_ref": "data", "data": data, "total": total, "has_more": more}
	if more && len(page) > 0 {
		list["more_starting_after"] = jsonx.Time{Time: page[len(page)-1].at}
	}
	out := map[string]any{"redeemables": list, "stacking_rules": rules, "id": ids.New("qual_")}
	if r.Order != nil {
		o, _, err := s.engine.Effects(ctx, projectID, r.Order, nil, true)
		if err != nil {
			return nil, err
		}
		out["order"] = o
	}
	if r.TrackingID != nil {
		out["tracking_id"] = *r.TrackingID
	}
	return out, nil
}

// scenario is what a qualification scenario qualifies: the customer's
// wallet, the project's promotion tiers, which of the rules' conditions it
// reads, and whether only the redeemables for the order's products stay.
type scenario struct {
	wallet, tiers bool
	stacks        bool // the promotion stacks whose tiers all qualify, instead of the tiers
	scope         rules.Scope
	products      int
}

// Products scenarios keep the redeemables for the order's products: whose
// discount is for specific items of it or whose rules require one of them
// (forProducts), or only the former (discountingProducts).
const (
	forProducts = iota + 1
	discountingProducts
)

var scenarios = map[string]scenario{
	"ALL":                           {wallet: true, tiers: true},
	"CUSTOMER_WALLET":               {wallet: true},
	"AUDIENCE_ONLY":                 {wallet: true, tiers: true, scope: rules.ScopeAudience},
	"PRODUCTS":                      {tiers: true, scope: rules.ScopeWithoutCustomer, products: forProducts},
	"PRODUCTS_DISCOUNT":             {tiers: true, scope: rules.ScopeWithoutCustomer, products: discountingProducts},
	"PRODUCTS_BY_CUSTOMER":          {wallet: true, tiers: true, products: forProducts},
	"PRODUCTS_DISCOUNT_BY_CUSTOMER": {wallet: true, tiers: true, products: discountingProducts},
	"PROMOTION_STACKS":              {tiers: true, stacks: true},
}

// keeps says whether a qualified redeemable belongs to the scenario's answer.
func (sc scenario) keeps(c *engine.Candidate, o *orders.Request) bool {
	switch sc.products {
	case forProducts:
		return c.NamesItem() || c.DiscountsItems(o)
	case discountingProducts:
		return c.DiscountsItems(o)
	}
	return true
}
