package earning

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/rules"
)

// What stands between an event and its points besides a rule's dates:
// the validation rule it names and its validity windows.

// ValidationRules are the validation rules an earning rule names
// (validation.Service with the customer's segments, wired in
// regional/app.go).
type ValidationRules interface {
	// Passes evaluates rule ruleID on in through q, the customer's
	// segments read for it when the rule reads them (cust nil: none).
	Passes(ctx context.Context, q db.Querier, projectID, ruleID string, in rules.Input, cust *customers.Customer) (bool, error)
	// SetAssignmentIn makes ruleID the one rule assigned to the object
	// ("" drops it): 404 naming a rule that does not exist.
	SetAssignmentIn(ctx context.Context, q db.Querier, projectID, objectType, objectID, ruleID string) error
}

// applyWindows writes the request's validity windows onto r, checked as a
// voucher's are and, since a window that never opens or never closes is a
// mistake, a timeframe needs both its interval and a duration shorter than
// it. null drops a window.
func applyWindows(r *EarningRule, q RuleRequest, where string) error {
	if err := campaigns.CheckValidity(q.ValidityTimeframe, q.ValidityDayOfWeek, q.ValidityHours); err != nil {
		var e *apierr.Error
		if errors.As(err, &e) && where != "" {
			return apierr.InvalidPayload(where + e.Details)
		}
		return err
	}
	if present(q.ValidityTimeframe) {
		var tf struct{ Interval, Duration string }
		_ = json.Unmarshal(q.ValidityTimeframe, &tf)
		iv, du := campaigns.ISODuration(tf.Interval), campaigns.ISODuration(tf.Duration)
		if iv <= 0 || du <= 0 || du >= iv {
			return apierr.InvalidPayload(where + "validity_timeframe needs an interval and a shorter duration, both ISO 8601 durations above zero (interval P2D, duration PT1H)")
		}
	}
	for _, w := range []struct{ dst, src *json.RawMessage }{{&r.Attrs.ValidityTimeframe, &q.ValidityTimeframe},
		{&r.Attrs.ValidityDayOfWeek, &q.ValidityDayOfWeek}, {&r.Attrs.ValidityHours, &q.ValidityHours}} {
		switch {
		case present(*w.src):
			*w.dst = *w.src
		case len(*w.src) > 0: // null
			*w.dst = nil
		}
	}
	if len(q.ValidationRuleID) > 0 {
		var id *string
		if json.Unmarshal(q.ValidationRuleID, &id) != nil || id != nil && (*id == "" || len(*id) > 100) {
			return apierr.InvalidPayload(where + "validation_rule_id must be the id (val_…) of a validation rule, or null")
		}
		r.Attrs.ValidationRuleID = id
	}
	return nil
}

// assignRule keeps the validation rule assignment (related_object_type
// earning_rule) in step with r's validation_rule_id, in q.
func (s *Service) assignRule(ctx context.Context, q db.Querier, projectID string, r EarningRule) error {
	if s.rules == nil {
		if r.Attrs.ValidationRuleID != nil {
			return apierr.Unavailable("Validation rules cannot be read on this instance.")
		}
		return nil
	}
	id := ""
	if r.Attrs.ValidationRuleID != nil {
		id = *r.Attrs.ValidationRuleID
	}
	return s.rules.SetAssignmentIn(ctx, q, projectID, "earning_rule", r.ID, id)
}

// gate answers whether an event's context passes the validation rule of
// an earning rule (none: it passes), evaluating each validation rule once
// per event and building the context (build) only when a rule needs it.
// A validation rule deleted since it was named fails: the earning rule
// earns nothing until it names another, as the reference gives no points
// when its rule is not met.
func (s *Service) gate(ctx context.Context, q db.Querier, projectID string,
	build func() (rules.Input, *customers.Customer, error)) func(EarningRule) (bool, error) {
	verdicts := map[string]bool{}
	var in *rules.Input
	var cust *customers.Customer
	return func(r EarningRule) (bool, error) {
		id := r.Attrs.ValidationRuleID
		if id == nil {
			return true, nil
		}
		if v, ok := verdicts[*id]; ok {
			return v, nil
		}
		if s.rules == nil {
			return false, apierr.Unavailable("Validation rules cannot be read on this instance.")
		}
		if in == nil {
			i, c, err := build()
			if err != nil {
				return false, err
			}
			in, cust = &i, c
		}
		ok, err := s.rules.Passes(ctx, q, projectID, *id, *in, cust)
		var e *apierr.Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			ok, err = false, nil
		}
		if err != nil {
			return false, err
		}
		verdicts[*id] = ok
		return ok, nil
	}
}

// ruleCustomer is a customer as validation rules read it.
func ruleCustomer(c *customers.Customer) *rules.Customer {
	if c == nil {
		return nil
	}
	out := &rules.Customer{ID: c.ID, Metadata: c.Attrs.Metadata}
	if c.SourceID != nil {
		out.SourceID = *c.SourceID
	}
	return out
}

// customerOf reads a customer for a rule's context (nil when gone).
func customerOf(ctx context.Context, q db.Querier, projectID, id string) (*customers.Customer, error) {
	if id == "" {
		return nil, nil
	}
	found, err := customers.Many(ctx, q, projectID, []string{id})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return &found[0], nil
}

// TierEvents are the events of rules that earn when a card's holder moves
// between the program's tiers.
var TierEvents = []string{"customer.loyalty.tier.joined", "customer.loyalty.tier.left", "customer.loyalty.tier.upgraded",
	"customer.loyalty.tier.downgraded", "customer.loyalty.tier.prolonged"}

func isTierEvent(ev string) bool { return slices.Contains(TierEvents, ev) }
