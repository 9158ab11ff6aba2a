package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
)

// Rule is a stored validation rule. Its documents are the JSON the request
// gave (compacted), nil when it gave none.
type Rule struct {
	ID           string
	Name         string
	Rules        json.RawMessage
	BundleRules  json.RawMessage
	Error        json.RawMessage
	ApplicableTo json.RawMessage
	Type         string
	ContextType  string
	// Version counts the rule's changes: compiled rules are cached by it.
	Version          int64
	AssignmentsCount int
	CreatedAt        time.Time
	UpdatedAt        *time.Time
}

// View is the reference's ValidationRule.
type View struct {
	ID               string          `json:"id"`
	Name             string          `json:"name"`
	Rules            json.RawMessage `json:"rules"`
	BundleRules      json.RawMessage `json:"bundle_rules"`
	Error            json.RawMessage `json:"error,omitempty"`
	ApplicableTo     json.RawMessage `json:"applicable_to"`
	CreatedAt        jsonx.Time      `json:"created_at"`
	UpdatedAt        *jsonx.Time     `json:"updated_at"`
	Type             string          `json:"type"`
	ContextType      string          `json:"context_type"`
	AssignmentsCount int             `json:"assignments_count"`
	Object           string          `json:"object"`
}

// What a rule shows for documents it was not given.
var (
	emptyRules        = json.RawMessage(`{}`)
	emptyBundleRules  = json.RawMessage(`{}`)
	emptyApplicableTo = json.RawMessage(`{"excluded":[],"included":[],"included_all":false}`)
)

// View renders r.
func (r Rule) View() View {
	v := View{ID: r.ID, Name: r.Name, Rules: r.Rules, BundleRules: r.BundleRules, Error: r.Error, ApplicableTo: r.ApplicableTo,
		CreatedAt: jsonx.Time{Time: r.CreatedAt}, UpdatedAt: jsonx.Ptr(r.UpdatedAt), Type: r.Type, ContextType: r.ContextType,
		AssignmentsCount: r.AssignmentsCount, Object: "validation_rules"}
	if v.Rules == nil {
		v.Rules = emptyRules
	}
	if v.BundleRules == nil {
		v.BundleRules = emptyBundleRules
	}
	if v.ApplicableTo == nil {
		v.ApplicableTo = emptyApplicableTo
	}
	return v
}

// Assignment ties a rule to the object it restricts.
type Assignment struct {
	ID                string
	RuleID            string
	RelatedObjectType string
	RelatedObjectID   string
	CreatedAt         time.Time
}

// Object is what an assignment ties a rule to: a campaign, a promotion
// tier, an earning rule… by its type (related_object_type) and id.
type Object struct {
	Type, ID string
}

// AssignmentRef names an assignment the way its path does:
// /v1/validation-rules/{validationRuleId}/assignments/{assignmentId}, in a
// project.
type AssignmentRef struct {
	Project, Rule, ID string
}

// AssignmentView is the reference's ValidationRuleAssignment.
type AssignmentView struct {
	ID                string     `json:"id"`
	RuleID            string     `json:"rule_id"`
	RelatedObjectID   string     `json:"related_object_id"`
	RelatedObjectType string     `json:"related_object_type"`
	CreatedAt         jsonx.Time `json:"created_at"`
	Object            string     `json:"object"`
}

// View renders a.
func (a Assignment) View() AssignmentView {
	return AssignmentView{ID: a.ID, RuleID: a.RuleID, RelatedObjectID: a.RelatedObjectID, RelatedObjectType: a.RelatedObjectType,
		CreatedAt: jsonx.Time{Time: a.CreatedAt}, Object: "validation_rules_assignment"}
}

// The reference's enums.
var (
	// Types are a rule's types; the first is the default.
	Types = []string{"expression", "basic", "advanced", "complex"}
	// ContextTypes are where a rule applies; "global" is the default.
	ContextTypes = []string{"earning_rule.order.paid", "earning_rule.custom_event", "earning_rule.customer.segment.entered",
		"earning_rule.customer.tier.joined", "earning_rule.customer.tier.left", "earning_rule.customer.tier.upgraded",
		"earning_rule.customer.tier.downgraded", "earning_rule.customer.tier.prolonged", "campaign.discount_coupons",
		"campaign.discount_coupons.discount.apply_to_order", "campaign.discount_coupons.discount.apply_to_items",
		"campaign.discount_coupons.discount.apply_to_items_proportionally",
		"campaign.discount_coupons.discount.apply_to_items_proportionally_by_quantity",
		"campaign.discount_coupons.discount.apply_to_items_by_quantity", "campaign.discount_coupons.discount.fixed.apply_to_items",
		"campaign.discount_coupons.discount.percent.apply_to_items", "campaign.gift_vouchers",
		"campaign.gift_vouchers.gift.apply_to_order", "campaign.gift_vouchers.gift.apply_to_items", "campaign.referral_program",
		"campaign.referral_program.discount.apply_to_order", "campaign.referral_program.discount.apply_to_items",
		"campaign.referral_program.discount.apply_to_items_proportionally",
		"campaign.referral_program.discount.apply_to_items_proportionally_by_quantity",
		"campaign.referral_program.discount.apply_to_items_by_quantity", "campaign.referral_program.discount.fixed.apply_to_items",
		"campaign.referral_program.discount.percent.apply_to_items", "campaign.promotion",
		"campaign.promotion.discount.apply_to_order", "campaign.promotion.discount.apply_to_items",
		"campaign.promotion.discount.apply_to_items_proportionally",
		"campaign.promotion.discount.apply_to_items_proportionally_by_quantity",
		"campaign.promotion.discount.apply_to_items_by_quantity", "campaign.promotion.discount.fixed.apply_to_items",
		"campaign.promotion.discount.percent.apply_to_items", "campaign.loyalty_program", "voucher.discount_voucher",
		"voucher.discount_voucher.discount.apply_to_order", "voucher.discount_voucher.discount.apply_to_items",
		"voucher.discount_voucher.discount.apply_to_items_proportionally",
		"voucher.discount_voucher.discount.apply_to_items_proportionally_by_quantity",
		"voucher.discount_voucher.discount.apply_to_items_by_quantity", "voucher.discount_voucher.discount.fixed.apply_to_items",
		"voucher.discount_voucher.discount.percent.apply_to_items", "voucher.gift_voucher", "voucher.gift_voucher.gift.apply_to_order",
		"voucher.gift_voucher.gift.apply_to_items", "voucher.loyalty_card", "distribution.custom_event", "distribution.order.paid",
		"distribution.order.created", "distribution.order.canceled", "distribution.order.updated",
		"reward_assignment.pay_with_points", "global"}
	// ObjectTypes are what a rule is assigned to; the first is the default.
	ObjectTypes = []string{"voucher", "promotion_tier", "campaign", "earning_rule", "distribution", "reward_assignment"}
)

const maxName = 200

// Body is a request body: the properties present are set, an explicit
// null resets one, absent ones are left alone.
type Body map[string]json.RawMessage

// UnmarshalJSON refuses a body that is not an object.
func (b *Body) UnmarshalJSON(raw []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return apierr.InvalidPayload("The body must be a JSON object.")
	}
	*b = m
	return nil
}

// apply sets on r the properties b names, checking each; create requires
// a name.
func (b Body) apply(r *Rule, create bool) error {
	if raw, ok := b["name"]; ok || create {
		var n *string
		if json.Unmarshal(raw, &n) != nil || n == nil || strings.TrimSpace(*n) == "" || utf8.RuneCountInString(*n) > maxName {
			return apierr.InvalidPayload(fmt.Sprintf("name is required: a string of 1 to %d characters, unique in the project", maxName))
		}
		r.Name = *n
	}
	for _, d := range []struct {
		key string
		dst *json.RawMessage
	}{{"rules", &r.Rules}, {"bundle_rules", &r.BundleRules}, {"error", &r.Error}, {"applicable_to", &r.ApplicableTo}} {
		raw, ok := b[d.key]
		if !ok {
			continue
		}
		if isNull(raw) {
			*d.dst = nil
			continue
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			return apierr.InvalidPayload(d.key + " must be an object or null")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return apierr.InvalidPayload(d.key + " must be an object or null")
		}
		*d.dst = buf.Bytes()
	}
	for _, e := range []struct {
		key    string
		dst    *string
		values []string
	}{{"type", &r.Type, Types}, {"context_type", &r.ContextType, ContextTypes}} {
		raw, ok := b[e.key]
		if !ok && !create {
			continue
		}
		var s *string
		if ok && json.Unmarshal(raw, &s) != nil {
			return apierr.InvalidPayload(fmt.Sprintf("%s must be a string, one of %s", e.key, strings.Join(e.values, ", ")))
		}
		switch {
		case s == nil && e.key == "type":
			*e.dst = Types[0]
		case s == nil:
			*e.dst = "global"
		case slices.Contains(e.values, *s):
			*e.dst = *s
		default:
			return apierr.InvalidPayload(fmt.Sprintf("%s must be one of %s; got %q", e.key, strings.Join(e.values, ", "), *s))
		}
	}
	return nil
}

// assignmentOf reads an assignment request: related_object_type (voucher
// when absent) and related_object_id, or the older form naming the object
// under its type ({"voucher": "…"}, {"campaign": "…"}).
func (b Body) assignmentOf() (typ, id string, err error) {
	str := func(key string) (string, bool, error) {
		raw, ok := b[key]
		if !ok || isNull(raw) {
			return "", false, nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", true, apierr.InvalidPayload(key + " must be a string")
		}
		return s, true, nil
	}
	typ, _, err = str("related_object_type")
	if err != nil {
		return "", "", err
	}
	id, given, err := str("related_object_id")
	if err != nil {
		return "", "", err
	}
	if !given && typ == "" {
		for _, t := range ObjectTypes {
			if v, ok, err := str(t); err != nil {
				return "", "", err
			} else if ok {
				typ, id, given = t, v, true
				break
			}
		}
	}
	if typ == "" {
		typ = ObjectTypes[0]
	}
	if !slices.Contains(ObjectTypes, typ) {
		return "", "", apierr.InvalidPayload(fmt.Sprintf("related_object_type must be one of %s; got %q", strings.Join(ObjectTypes, ", "), typ))
	}
	if strings.TrimSpace(id) == "" || len(id) > 300 {
		return "", "", apierr.InvalidPayload("related_object_id is required: the id of the " + typ + " the rule restricts (at most 300 characters)")
	}
	return typ, id, nil
}

// isNull says whether a document is absent or null: a property the body
// resets.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
