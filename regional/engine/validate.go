package engine

import (
	"context"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/customers"
)

// ApplicableLimit is the default stacking rules' applicable_redeemables_limit.
const ApplicableLimit = 5

// outcome is a request's redeemables as validated: each one's status
// (APPLICABLE, INAPPLICABLE or SKIPPED) and effect, and the order after
// the applicable ones.
type outcome struct {
	cs      []*candidate
	status  []string
	skip    []map[string]any // a SKIPPED one's details
	effects []applied        // an APPLICABLE one's effect
	order   *OrderView
	valid   bool
}

// decide applies the stacking rules (application mode ALL: every
// redeemable must apply, else none does; at most ApplicableLimit apply)
// and recalculates the order with the applicable ones.
func (e *Engine) decide(ctx context.Context, q db.Querier, projectID string, r *Request, cs []*candidate) (*outcome, error) {
	o := &outcome{cs: cs, status: make([]string, len(cs)), skip: make([]map[string]any, len(cs)),
		effects: make([]applied, len(cs)), valid: true}
	var use []*candidate
	for i, c := range cs {
		switch {
		case c.refusal != nil:
			o.status[i], o.valid = "INAPPLICABLE", false
		case len(use) >= ApplicableLimit:
			o.status[i] = "SKIPPED"
			o.skip[i] = map[string]any{"key": "applicable_redeemables_limit_exceeded",
				"message": "Applicable redeemables limit exceeded"}
		default:
			o.status[i] = "APPLICABLE"
			use = append(use, c)
		}
	}
	if !o.valid {
		// ALL: one inapplicable redeemable and the rest are skipped.
		for i := range cs {
			if o.status[i] != "INAPPLICABLE" {
				o.status[i] = "SKIPPED"
				o.skip[i] = map[string]any{"key": "preceding_validation_failed", "message": "Preceding validation failed"}
			}
		}
		use = nil
	}
	order, effects, err := e.recalc(ctx, q, projectID, r.Order, use)
	if err != nil {
		return nil, err
	}
	o.order = order
	k := 0
	for i := range cs {
		if o.status[i] == "APPLICABLE" {
			o.effects[i] = effects[k]
			k++
		}
	}
	return o, nil
}

// Validate is POST /v1/validations: whether the redeemables apply to the
// order and customer together, and the order they would make. A LOCK
// session reserves the applicable vouchers for its key.
func (e *Engine) Validate(ctx context.Context, projectID string, r Request) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "engine.Validate")
	defer telemetry.End(span, &err)
	if err := r.check(); err != nil {
		return nil, err
	}
	now := e.now()
	cust, err := e.readCustomer(ctx, projectID, r.Customer)
	if err != nil {
		return nil, err
	}
	sess, until := session(&r, now)
	key := ""
	if sess != nil {
		key = sess.Key
	}
	cs, err := e.resolve(ctx, e.pool, projectID, &r, cust, key, false, now)
	if err != nil {
		return nil, err
	}
	o, err := e.decide(ctx, e.pool, projectID, &r, cs)
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
	return out, e.validationEvents(ctx, projectID, o, cust)
}

// validationEvents raises voucher.validation.succeeded or .failed for each
// voucher validated.
func (e *Engine) validationEvents(ctx context.Context, projectID string, o *outcome, cust *customers.Customer) error {
	if e.Events == nil {
		return nil
	}
	for i, c := range o.cs {
		if c.voucher == nil {
			continue
		}
		ev, obj := EventValidationSucceeded, map[string]any{"voucher": c.voucher.View(), "order": o.order}
		if o.status[i] == "INAPPLICABLE" {
			ev, obj["error"] = EventValidationFailed, c.refusal
		}
		if cust != nil && cust.ID != "" {
			obj["customer"] = cust.View()
		}
		if err := e.Events.Emit(ctx, e.pool, projectID, ev, c.voucher.ID, obj); err != nil {
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
		"order": o.order, "stacking_rules": defaultStackingRules}
	if r.TrackingID != nil {
		out["tracking_id"] = *r.TrackingID
	}
	return out
}

func emptyList() map[string]any {
	return map[string]any{"data": []any{}, "total": 0, "data_ref": "data", "object": "list"}
}

// defaultStackingRules are the stacking rules every project has until the
// management API's stacking rules are served.
var defaultStackingRules = map[string]any{
	"redeemables_limit": RedeemablesLimit, "applicable_redeemables_limit": ApplicableLimit,
	"applicable_redeemables_per_category_limit": 1, "applicable_exclusive_redeemables_limit": 1,
	"applicable_exclusive_redeemables_per_category_limit": 1, "exclusive_categories": []any{}, "joint_categories": []any{},
	"redeemables_application_mode": "ALL", "redeemables_sorting_rule": "REQUESTED_ORDER",
	"redeemables_products_application_mode": "STACK", "redeemables_no_effect_rule": "REDEEM_ANYWAY",
	"no_effect_skip_categories": []any{}, "no_effect_redeem_anyway_categories": []any{},
	"redeemables_rollback_order_mode": "WITH_ORDER",
}
