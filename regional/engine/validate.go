package engine

import (
	"context"
	"sort"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/calc"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

// outcome is a request's redeemables as validated: each one's status
// (APPLICABLE, INAPPLICABLE or SKIPPED) and effect, and the order after
// the applicable ones.
type outcome struct {
	cs      []*Candidate
	status  []string
	skip    []map[string]any // a SKIPPED one's details
	effects []calc.Effect    // an APPLICABLE one's effect
	order   *calc.OrderView
	valid   bool
	rules   tenancy.StackingRules
}

// decide applies the project's stacking rules and recalculates the order
// with the applicable redeemables: at most applicable_redeemables_limit of
// them; in the ALL application mode one inapplicable redeemable makes the
// request invalid and skips the rest, in PARTIAL the others still apply;
// with redeemables_no_effect_rule SKIP one that changes nothing is skipped.
// The category rules (categoryRules) leave out what exclusivity and the
// per-category limits do not admit; redeemables apply in the requested
// order, or with redeemables_sorting_rule CATEGORY_HIERARCHY in their
// categories' hierarchy (the lowest first; those without a category last;
// ties in the requested order). The answer lists them as requested.
func (e *Engine) decide(ctx context.Context, q db.Querier, projectID string, r *Request, cs []*Candidate,
	rules tenancy.StackingRules) (*outcome, error) {
	o := &outcome{cs: cs, status: make([]string, len(cs)), skip: make([]map[string]any, len(cs)),
		effects: make([]calc.Effect, len(cs)), valid: true, rules: rules}
	partial := rules.RedeemablesApplicationMode == "PARTIAL"
	var use []*Candidate
	var at []int // use's indexes in cs
	for i, c := range cs {
		if c.refusal != nil {
			o.status[i] = "INAPPLICABLE"
			o.valid = o.valid && partial
			continue
		}
		o.status[i] = "APPLICABLE"
		use, at = append(use, c), append(at, i)
	}
	if !o.valid {
		// ALL: one inapplicable redeemable and the rest are skipped.
		for i := range cs {
			if o.status[i] != "INAPPLICABLE" {
				o.status[i] = "SKIPPED"
				o.skip[i] = map[string]any{"key": "preceding_validation_failed", "message": "Preceding validation failed"}
			}
		}
		use, at = nil, nil
	}
	if rules.RedeemablesSortingRule == "CATEGORY_HIERARCHY" {
		if err := byHierarchy(ctx, q, projectID, use, at); err != nil {
			return nil, err
		}
	}
	use, at = categoryRules(rules, use, at, o)
	order, effects, fates, err := e.stack(ctx, q, projectID, r.Order, use, calc.Options{Views: true,
		Initial: rules.DiscountCalculationMode == "INITIAL_AMOUNT", Limit: rules.ApplicableRedeemablesLimit,
		SkipNoEffect: rules.RedeemablesNoEffectRule == "SKIP"})
	if err != nil {
		return nil, err
	}
	applicable := 0
	for k, i := range at {
		switch fates[k] {
		case calc.PastLimit:
			o.status[i] = "SKIPPED"
			o.skip[i] = map[string]any{"key": "applicable_redeemables_limit_exceeded", "message": "Applicable redeemables limit exceeded"}
		case calc.SkipsNoEffect:
			o.status[i] = "SKIPPED"
			o.skip[i] = map[string]any{"key": "no_effect", "message": "Redeemable has no effect on the order"}
		default:
			o.effects[i] = effects[k]
			applicable++
		}
	}
	o.order = order
	// PARTIAL: valid when something applies.
	if partial && applicable == 0 {
		o.valid = false
	}
	return o, nil
}

// Validate is POST /v1/validations: whether the redeemables apply to the
// order and customer together, and the order they would make. A LOCK
// session reserves the applicable vouchers for its key.
func (e *Engine) Validate(ctx context.Context, projectID string, r Request) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "engine.Validate")
	defer telemetry.End(span, &err)
	rules, err := e.admit(ctx, projectID, &r)
	if err != nil {
		return nil, err
	}
	now := e.Now()
	sess, until := session(&r, now)
	key := ""
	if sess != nil {
		key = sess.Key
	}
	cs, cust, err := e.resolve(ctx, e.pool, projectID, &r, &requestCustomer{p: r.Customer}, key, readOnly, now)
	if err != nil {
		return nil, err
	}
	o, err := e.decide(ctx, e.pool, projectID, &r, cs, rules)
	if err != nil {
		return nil, err
	}
	if o.valid && sess != nil {
		var held []string
		for _, c := range cs {
			if c.voucher != nil {
				held = append(held, c.voucher.ID)
			}
		}
		custID := ""
		if cust != nil {
			custID = cust.ID
		}
		if err := holdSessions(ctx, e.pool, projectID, held, key, custID, until); err != nil {
			return nil, err
		}
	}
	out := o.view(&r)
	out["id"] = ids.New("valid_")
	out["valid"] = o.valid
	if sess != nil && o.valid {
		out["session"] = sess
	}
	return out, e.validationNotices(ctx, projectID, o, cust)
}

// validationNotices raises voucher.validation.succeeded or .failed for each
// voucher validated.
func (e *Engine) validationNotices(ctx context.Context, projectID string, o *outcome, cust *customers.Customer) error {
	if e.Notify == nil {
		return nil
	}
	for i, c := range o.cs {
		var voucher any
		var id string
		switch {
		case c.voucher != nil:
			voucher, id = c.voucher.View(), c.voucher.ID
		case c.card != nil:
			voucher, id = c.card.Card.View(c.card.Card.Campaign), c.card.Card.ID
		default:
			continue
		}
		ev, obj := EventValidationSucceeded, map[string]any{"voucher": voucher, "order": o.order}
		if o.status[i] == "INAPPLICABLE" {
			ev, obj["error"] = EventValidationFailed, c.refusal
		}
		if cust != nil && cust.ID != "" {
			obj["customer"] = cust.View()
		}
		if err := e.Notify.Emit(ctx, e.pool, webhooks.Notice{Project: projectID, Type: ev, Entity: id, Object: obj}); err != nil {
			return err
		}
	}
	return nil
}

// view renders the outcome's redeemables in the reference's shapes: every
// one in redeemables, the skipped and inapplicable ones again in their
// lists, and the order.
func (o *outcome) view(r *Request) map[string]any {
	all, skipped, inapplicable := []any{}, []any{}, []any{}
	for i, c := range o.cs {
		v := map[string]any{"status": o.status[i], "id": c.req.ID, "object": c.req.Object, "categories": []any{}}
		meta := map[string]any{}
		switch {
		case c.voucher != nil && c.voucher.Attrs.Metadata != nil:
			meta = c.voucher.Attrs.Metadata
		case c.tier != nil && c.tier.Metadata != nil:
			meta = c.tier.Metadata
		case c.card != nil && c.card.Card.Metadata != nil:
			meta = c.card.Card.Metadata
		}
		v["metadata"] = meta
		if r.Options.has("redeemable") && c.campaign != nil {
			v["campaign_id"], v["campaign_name"] = c.campaign.ID, c.campaign.Name
		}
		if c.tier != nil {
			v["name"] = c.tier.Name
		}
		switch o.status[i] {
		case "APPLICABLE":
			ef := o.effects[i]
			v["order"], v["result"] = ef.Order, ef.Result
			v["applicable_to"], v["inapplicable_to"] = emptyList(), emptyList()
		case "INAPPLICABLE":
			v["result"] = map[string]any{"error": c.refusal, "details": map[string]any{"key": c.refusal.Key, "message": c.refusal.Details}}
			inapplicable = append(inapplicable, v)
		case "SKIPPED":
			v["result"] = map[string]any{"details": o.skip[i]}
			skipped = append(skipped, v)
		}
		all = append(all, v)
	}
	out := map[string]any{"redeemables": all, "skipped_redeemables": skipped, "inapplicable_redeemables": inapplicable,
		"order": o.order, "stacking_rules": o.rules}
	if r.TrackingID != nil {
		out["tracking_id"] = *r.TrackingID
	}
	return out
}

func emptyList() map[string]any {
	return map[string]any{"data": []any{}, "total": 0, "data_ref": "data", "object": "list"}
}

// categoryRules applies the stacking rules' category rules to the
// applicable redeemables (use, at their indexes in the outcome): when one
// in an exclusive category applies, only exclusive ones (up to
// applicable_exclusive_redeemables_limit, and the per-category limit of
// exclusive ones) and those of joint categories stay; every category keeps
// at most its limit (applicable_redeemables_category_limits, else
// applicable_redeemables_per_category_limit). What is left out is SKIPPED
// with the reference's reason. Redeemables without a category are free of
// all this but exclusivity.
func categoryRules(rules tenancy.StackingRules, use []*Candidate, at []int, o *outcome) ([]*Candidate, []int) {
	exclusive := map[string]bool{}
	for _, c := range rules.ExclusiveCategories {
		exclusive[c] = true
	}
	joint := map[string]bool{}
	for _, c := range rules.JointCategories {
		joint[c] = true
	}
	anyExclusive := false
	for _, c := range use {
		anyExclusive = anyExclusive || exclusive[c.CategoryID()]
	}
	var keptUse []*Candidate
	var keptAt []int
	perCategory, exclusives, exclusivePer := map[string]int{}, 0, map[string]int{}
	skip := func(i int, key, msg string) {
		o.status[i] = "SKIPPED"
		o.skip[i] = map[string]any{"key": key, "message": msg}
	}
	for k, c := range use {
		i, cat := at[k], c.CategoryID()
		switch {
		case anyExclusive && exclusive[cat]:
			if exclusives >= rules.ApplicableExclusiveRedeemablesLimit {
				skip(i, "exclusion_rules_not_met", "Exclusive redeemables limit reached")
				continue
			}
			if exclusivePer[cat] >= rules.ApplicableExclusiveRedeemablesPerCategoryLimit {
				skip(i, "applicable_exclusive_redeemables_per_category_limit_exceeded", "Exclusive redeemables per category limit exceeded")
				continue
			}
			exclusives++
			exclusivePer[cat]++
		case anyExclusive && !joint[cat]:
			skip(i, "exclusion_rules_not_met", "An exclusive redeemable applies")
			continue
		}
		if cat != "" {
			limit := rules.ApplicableRedeemablesPerCategoryLimit
			if l, ok := rules.ApplicableRedeemablesCategoryLimits[cat]; ok {
				limit = l
			}
			if perCategory[cat] >= limit {
				skip(i, "applicable_redeemables_per_category_limit_exceeded", "Applicable redeemables per category limit exceeded")
				continue
			}
			perCategory[cat]++
		}
		keptUse, keptAt = append(keptUse, c), append(keptAt, i)
	}
	return keptUse, keptAt
}

// byHierarchy sorts the applicable redeemables (use, with their indexes at)
// by their categories' hierarchy, the lowest first, those without a
// category (or whose category is gone) last, stable.
func byHierarchy(ctx context.Context, q db.Querier, projectID string, use []*Candidate, at []int) error {
	var cats []string
	for _, c := range use {
		if id := c.CategoryID(); id != "" {
			cats = append(cats, id)
		}
	}
	if len(cats) == 0 || len(use) < 2 {
		return nil
	}
	rank, err := categories.ByID(ctx, q, projectID, cats)
	if err != nil {
		return err
	}
	type pair struct {
		c  *Candidate
		at int
	}
	ps := make([]pair, len(use))
	for i := range use {
		ps[i] = pair{use[i], at[i]}
	}
	key := func(p pair) (bool, int64) {
		k, ok := rank[p.c.CategoryID()]
		return ok, k.Hierarchy
	}
	sort.SliceStable(ps, func(i, j int) bool {
		oi, hi := key(ps[i])
		oj, hj := key(ps[j])
		if oi != oj {
			return oi
		}
		return oi && hi < hj
	})
	for i, p := range ps {
		use[i], at[i] = p.c, p.at
	}
	return nil
}
