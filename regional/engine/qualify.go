package engine

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/tenancy"
)

// QualificationRequest is the body of POST /v1/qualifications.
type QualificationRequest struct {
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
	Metadata map[string]any  `json:"metadata"`
	Session  *SessionRequest `json:"session"`
}

// WalletLimit is how many of a customer's vouchers a qualification reads.
const WalletLimit = 1000

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
func (e *Engine) Qualify(ctx context.Context, projectID string, r QualificationRequest) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "engine.Qualify")
	defer telemetry.End(span, &err)
	name := "ALL"
	if r.Scenario != nil {
		name = *r.Scenario
	}
	sc, ok := scenarios[name]
	switch {
	case !ok:
		return nil, apierr.InvalidPayload("scenario must be one of ALL, CUSTOMER_WALLET, AUDIENCE_ONLY, PRODUCTS, PRODUCTS_DISCOUNT, " +
			"PRODUCTS_BY_CUSTOMER, PRODUCTS_DISCOUNT_BY_CUSTOMER, PROMOTION_STACKS")
	}
	limit, sorting := 5, "DEFAULT"
	var after *time.Time
	var filter *qualFilter
	expand := map[string]bool{}
	if o := r.Options; o != nil {
		if o.Limit != nil {
			if *o.Limit < 1 || *o.Limit > 50 {
				return nil, apierr.InvalidPayload("options.limit must be from 1 to 50")
			}
			limit = *o.Limit
		}
		if o.SortingRule != nil {
			switch sorting = *o.SortingRule; sorting {
			case "DEFAULT", "BEST_DEAL", "LEAST_DEAL":
			default:
				return nil, apierr.InvalidPayload("options.sorting_rule must be DEFAULT, BEST_DEAL or LEAST_DEAL")
			}
		}
		if filter, err = parseQualFilters(o.Filters); err != nil {
			return nil, err
		}
		for _, x := range o.Expand {
			switch x {
			case "redeemable", "category", "validation_rules":
				expand[x] = true
			default:
				return nil, apierr.InvalidPayload("options.expand: " + x + " is not one of redeemable, category, validation_rules")
			}
		}
		after = o.StartingAfter
	}
	if r.Order != nil {
		items, err := orders.NormalizeItems(r.Order.Items)
		if err != nil {
			return nil, err
		}
		r.Order.Items = items
	}
	if sc.products != 0 && (r.Order == nil || len(r.Order.Items) == 0) {
		return nil, apierr.InvalidPayload("scenario " + name + " qualifies promotions for the order's products: order.items must name at least one")
	}
	now := e.now()
	var cust *customers.Customer
	if sc.scope != validation.ScopeWithoutCustomer {
		if cust, err = e.readCustomer(ctx, projectID, r.Customer); err != nil {
			return nil, err
		}
	}
	var cs []*candidate
	if sc.wallet && cust != nil && cust.ID != "" {
		wallet, err := vouchers.HeldBy(ctx, e.pool, projectID, cust.ID, WalletLimit)
		if err != nil {
			return nil, err
		}
		for i := range wallet {
			if v := &wallet[i]; v.Type == vouchers.Discount || v.Type == vouchers.Gift {
				cs = append(cs, &candidate{req: Redeemable{Object: "voucher", ID: v.Code}, voucher: v})
			}
		}
		// The customer's loyalty cards that can pay for the order with
		// points (a COIN reward of their campaign).
		// (From the client side, only with a token bound to the customer:
		// a card's code and balance are its holder's to see.)
		if who, _ := identity.From(ctx); e.Redemptions != nil && (who.Kind != identity.KindClient || who.Customer != "") {
			cards, err := e.Redemptions.PayingCards(ctx, e.pool, projectID, cust.ID, WalletLimit)
			if err != nil {
				return nil, err
			}
			for i := range cards {
				p := &cards[i]
				cs = append(cs, &candidate{req: Redeemable{Object: "voucher", ID: p.Card.Code, Reward: &RewardRequest{ID: &p.RewardID}}, card: p})
			}
		}
	}
	var pre *catalogue
	if sc.tiers {
		if pre, err = e.catalogue(ctx, e.pool, projectID, now); err != nil {
			return nil, err
		}
		for i := range pre.tiers {
			t := pre.tiers[i] // candidates are changed by judging: each its own copy
			cs = append(cs, &candidate{req: Redeemable{Object: "promotion_tier", ID: t.ID}, tier: &t})
		}
	}
	if err := e.judgeWith(ctx, e.pool, projectID, r.Order, r.Metadata, cust, cs, "", now, pre, sc.scope); err != nil {
		return nil, err
	}
	if sc.stacks {
		if cs, err = e.qualifiedStacks(ctx, projectID, cs); err != nil {
			return nil, err
		}
	}
	type qualified struct {
		c      *candidate
		at     time.Time
		effect applied
	}
	var qs []qualified
	for _, c := range cs {
		if c.refusal != nil || !sc.keeps(c, r.Order) || !filter.admits(c) {
			continue
		}
		at := now
		switch {
		case c.stack != nil:
			at = c.stack.CreatedAt
		case c.voucher != nil:
			at = c.voucher.CreatedAt
		case c.card != nil:
			at = c.card.Card.CreatedAt
		case c.tier.CreatedAt != nil:
			at = *c.tier.CreatedAt
		}
		if after != nil && !at.Before(*after) {
			continue
		}
		qs = append(qs, qualified{c: c, at: at})
	}
	// The deals sort by each one's discount, computed without rendering;
	// only the page's are rendered.
	if sorting != "DEFAULT" {
		for i := range qs {
			_, effects, err := e.recalcViews(ctx, e.pool, projectID, r.Order, qs[i].c.applied(), false)
			if err != nil {
				return nil, err
			}
			qs[i].effect = sum(effects)
		}
	}
	sort.SliceStable(qs, func(i, j int) bool {
		switch sorting {
		case "BEST_DEAL":
			return qs[i].effect.Discount > qs[j].effect.Discount
		case "LEAST_DEAL":
			return qs[i].effect.Discount < qs[j].effect.Discount
		}
		return qs[i].at.After(qs[j].at)
	})
	total, more := len(qs), len(qs) > limit
	if more {
		// The cursor is a creation time, exclusive: a page ends before a
		// run of equal times it would split (or, when the run fills it,
		// after the run), so that the next page loses none of them.
		end := limit
		if sorting == "DEFAULT" {
			for end > 0 && qs[end-1].at.Equal(qs[end].at) {
				end--
			}
			if end == 0 {
				for end = limit; end < len(qs) && qs[end].at.Equal(qs[limit-1].at); end++ {
				}
			}
		}
		qs, more = qs[:end], end < len(qs)
	}
	for i := range qs {
		order, effects, err := e.recalc(ctx, e.pool, projectID, r.Order, qs[i].c.applied())
		if err != nil {
			return nil, err
		}
		if qs[i].c.stack == nil {
			qs[i].effect = effects[0]
			continue
		}
		// A stack: its tiers' results, and the order after them all.
		results := make([]any, len(effects))
		for k, ef := range effects {
			results[k] = map[string]any{"id": qs[i].c.parts[k].req.ID, "object": "promotion_tier", "result": ef.Result}
		}
		qs[i].effect = sum(effects)
		qs[i].effect.Order, qs[i].effect.Result = order, map[string]any{"promotion_tiers": results}
	}
	rules, err := e.stackingRules(ctx, projectID)
	if err != nil {
		return nil, err
	}
	page := make([]*candidate, len(qs))
	for i := range qs {
		page[i] = qs[i].c
	}
	expanded, err := e.expansions(ctx, projectID, page, expand, rules)
	if err != nil {
		return nil, err
	}
	data := make([]any, 0, len(qs))
	for _, q := range qs {
		c := q.c
		v := map[string]any{"id": c.req.ID, "object": c.req.Object, "created_at": jsonx.Time{Time: q.at},
			"result": q.effect.Result, "order": q.effect.Order, "applicable_to": emptyList(), "inapplicable_to": emptyList(),
			"metadata": map[string]any{}, "categories": []any{}}
		if c.campaign != nil {
			v["campaign_id"], v["campaign_name"] = c.campaign.ID, c.campaign.Name
		}
		if c.voucher != nil && c.voucher.Attrs.Metadata != nil {
			v["metadata"] = c.voucher.Attrs.Metadata
		}
		if p := c.card; p != nil {
			// What the card pays the order with, at its reward's ratio.
			if p.Card.Metadata != nil {
				v["metadata"] = p.Card.Metadata
			}
			k := p.Reward.Attrs.Parameters.Coin
			v["result"] = map[string]any{"loyalty_card": map[string]any{"points": q.effect.Points, "balance": p.Card.Balance,
				"exchange_ratio": k.ExchangeRatio, "points_ratio": k.PointsRatio}}
		}
		if c.stack != nil {
			v["name"], v["tiers"] = c.stack.Name, map[string]any{"ids": c.stack.TierIDs, "hierarchy_mode": "MANUAL"}
		}
		if c.tier != nil {
			v["name"] = c.tier.Name
			if c.tier.Banner != nil {
				v["banner"] = *c.tier.Banner
			}
			if c.tier.Metadata != nil {
				v["metadata"] = c.tier.Metadata
			}
			if expand["redeemable"] {
				v["hierarchy"] = c.tier.Hierarchy // Tally's: the reference's qualification does not show it
			}
		}
		expanded(c, v)
		data = append(data, v)
	}
	list := map[string]any{"object": "list", "data_ref": "data", "data": data, "total": total, "has_more": more}
	if more && len(qs) > 0 {
		list["more_starting_after"] = jsonx.Time{Time: qs[len(qs)-1].at}
	}
	out := map[string]any{"redeemables": list, "stacking_rules": rules, "id": ids.New("qual_")}
	if r.Order != nil {
		o, _, err := e.recalc(ctx, e.pool, projectID, r.Order, nil)
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
	scope         validation.Scope
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
	"AUDIENCE_ONLY":                 {wallet: true, tiers: true, scope: validation.ScopeAudience},
	"PRODUCTS":                      {tiers: true, scope: validation.ScopeWithoutCustomer, products: forProducts},
	"PRODUCTS_DISCOUNT":             {tiers: true, scope: validation.ScopeWithoutCustomer, products: discountingProducts},
	"PRODUCTS_BY_CUSTOMER":          {wallet: true, tiers: true, products: forProducts},
	"PRODUCTS_DISCOUNT_BY_CUSTOMER": {wallet: true, tiers: true, products: discountingProducts},
	"PROMOTION_STACKS":              {tiers: true, stacks: true},
}

// qualifiedStacks are the project's promotion stacks whose every tier is
// among the judged tiers and qualified, each a candidate of its tiers.
func (e *Engine) qualifiedStacks(ctx context.Context, projectID string, tiers []*candidate) ([]*candidate, error) {
	if e.tiers == nil {
		return nil, nil
	}
	stacks, err := e.tiers.Stacks(ctx, e.pool, projectID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*candidate, len(tiers))
	for _, c := range tiers {
		if c.tier != nil && c.refusal == nil {
			byID[c.tier.ID] = c
		}
	}
	var out []*candidate
next:
	for i := range stacks {
		st := &stacks[i]
		parts := make([]*candidate, 0, len(st.TierIDs))
		for _, id := range st.TierIDs {
			c, ok := byID[id]
			if !ok {
				continue next
			}
			parts = append(parts, c)
		}
		if len(parts) == 0 {
			continue
		}
		out = append(out, &candidate{req: Redeemable{Object: "promotion_stack", ID: st.ID}, stack: st, parts: parts,
			campaign: parts[0].campaign})
	}
	return out, nil
}

// applied are what a qualified redeemable applies: itself, or a stack's tiers.
func (c *candidate) applied() []*candidate {
	if c.stack != nil {
		return c.parts
	}
	return []*candidate{c}
}

// sum is the effects' discounts together.
func sum(effects []applied) applied {
	var out applied
	for _, ef := range effects {
		out.Discount += ef.Discount
	}
	if len(effects) == 1 {
		return effects[0]
	}
	return out
}

// keeps says whether a qualified redeemable belongs to the scenario's answer.
func (sc scenario) keeps(c *candidate, o *orders.Request) bool {
	switch sc.products {
	case forProducts:
		return c.namesItem || c.discountsItems(o)
	case discountingProducts:
		return c.discountsItems(o)
	}
	return true
}

// discountsItems says whether the redeemable's discount is for specific
// items of the order: an item-level effect on the lines its rules'
// applicable_to admit (not every line), or free units of a product or SKU
// one of the order's lines holds.
func (c *candidate) discountsItems(o *orders.Request) bool {
	raw := c.discount()
	if !present(raw) || o == nil {
		return false
	}
	var d discount
	if json.Unmarshal(raw, &d) != nil {
		return false
	}
	if d.Type != "UNIT" {
		return strings.HasPrefix(d.Effect, "APPLY_TO_ITEMS") && len(c.lines) > 0
	}
	units := d.Units
	if d.Effect != "ADD_MANY_ITEMS" {
		units = []discount{d}
	}
	for _, u := range units {
		ref, sku := u.Product, u.SKU != nil && (u.SKU.ID != "" || u.SKU.SourceID != "")
		if sku {
			ref = u.SKU
		}
		if ref == nil {
			continue
		}
		for _, it := range o.Items {
			if matchesRef(it, ref, sku) {
				return true
			}
		}
	}
	return false
}

// expansions reads what options.expand adds to the page's redeemables, in
// one query each, and returns what adds it to one's view: category, its
// category (its own, else its campaign's) with the stacking rules' type;
// validation_rules, the assignments of its rules (to it and to its
// campaign), each VALID since it qualified. redeemable adds nothing: every
// redeemable is shown with its own fields (id, object, name, campaign,
// metadata, created_at) already.
func (e *Engine) expansions(ctx context.Context, projectID string, page []*candidate, expand map[string]bool,
	rules tenancy.StackingRules) (func(*candidate, map[string]any), error) {
	var cats map[string]categories.Category
	if expand["category"] {
		var ids []string
		for _, c := range page {
			if id := c.categoryID(); id != "" {
				ids = append(ids, id)
			}
		}
		var err error
		if cats, err = categories.ByID(ctx, e.pool, projectID, ids); err != nil {
			return nil, err
		}
	}
	var asg map[string][]validation.AssignmentView
	if expand["validation_rules"] {
		var objects []string
		for _, c := range page {
			objects = append(objects, c.objectID())
			if id := c.campaignID(); id != "" {
				objects = append(objects, id)
			}
		}
		var err error
		if asg, err = validation.AssignmentsOf(ctx, e.pool, projectID, objects); err != nil {
			return nil, err
		}
	}
	return func(c *candidate, v map[string]any) {
		if cats != nil {
			list := []any{}
			if k, ok := cats[c.categoryID()]; ok {
				view := map[string]any{"id": k.ID, "name": k.Name, "hierarchy": k.Hierarchy, "object": "category",
					"created_at": jsonx.Time{Time: k.CreatedAt}, "updated_at": jsonx.Ptr(k.UpdatedAt)}
				switch {
				case contains(rules.ExclusiveCategories, k.ID):
					view["stacking_rules_type"] = "EXCLUSIVE"
				case contains(rules.JointCategories, k.ID):
					view["stacking_rules_type"] = "JOINT"
				}
				list = append(list, view)
			}
			v["categories"] = list
		}
		if asg != nil {
			data := []any{}
			for _, o := range []string{c.objectID(), c.campaignID()} {
				if o == "" {
					continue
				}
				for _, a := range asg[o] {
					data = append(data, map[string]any{"id": a.ID, "rule_id": a.RuleID, "related_object_id": a.RelatedObjectID,
						"related_object_type": a.RelatedObjectType, "created_at": a.CreatedAt, "object": a.Object, "validation_status": "VALID"})
				}
			}
			v["validation_rules_assignments"] = map[string]any{"object": "list", "data_ref": "data", "data": data, "total": len(data)}
		}
	}, nil
}
