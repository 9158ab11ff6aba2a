package qualifications

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
)

// Qualifications' options.filters: conditions on the redeemables' fields,
// joined by junction (and, the default, or or), evaluated in memory on the
// qualified redeemables.
//
//	{"junction": "or", "campaign_type": {"conditions": {"$in": ["PROMOTION"]}},
//	 "code": {"conditions": {"$is": ["SUMMER"]}}}

// filterFields are the fields a filter names and, for the ones the
// reference gives an enum, the values they take.
var filterFields = map[string][]string{
	"category_id":   nil,
	"campaign_id":   nil,
	"campaign_type": {"PROMOTION", "GIFT_VOUCHERS", "REFERRAL_PROGRAM", "DISCOUNT_COUPONS", "LOYALTY_PROGRAM"},
	"resource_id":   nil,
	"resource_type": {"campaign", "voucher", "promotion_tier"},
	"voucher_type":  nil,
	"code":          nil,
	"holder_role":   {"OWNER", "REFERRER", "REFEREE"},
}

var filterOps = []string{"$is", "$is_not", "$in", "$not_in", "$has_value", "$is_unknown"}

// filter is options.filters compiled.
type filter struct {
	or    bool
	conds []fieldCond
}

type fieldCond struct {
	field, op string
	values    []string
}

// parseFilters reads options.filters; a 400 names what is wrong.
func parseFilters(raw json.RawMessage) (*filter, error) {
	if !present(raw) {
		return nil, nil
	}
	bad := func(where, problem string) error {
		return apierr.InvalidPayload("options.filters" + where + ": " + problem)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, bad("", "must be an object of conditions by field, as {\"campaign_id\": {\"conditions\": {\"$in\": [\"camp_…\"]}}}")
	}
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	sort.Strings(names)
	f := &filter{}
	for _, field := range names {
		v := top[field]
		if field == "junction" {
			var j *string
			if err := json.Unmarshal(v, &j); err != nil || j != nil && !strings.EqualFold(*j, "and") && !strings.EqualFold(*j, "or") {
				return nil, bad(".junction", "must be and or or")
			}
			f.or = j != nil && strings.EqualFold(*j, "or")
			continue
		}
		enum, known := filterFields[field]
		if !known {
			return nil, bad("."+field, "is not a field filters take; they take "+strings.Join(sortedKeys(filterFields), ", ")+" and junction")
		}
		if !present(v) {
			continue
		}
		var wrap map[string]json.RawMessage
		if err := json.Unmarshal(v, &wrap); err != nil {
			return nil, bad("."+field, "must be an object: {\"conditions\": {\"$in\": […]}}")
		}
		where := "." + field + ".conditions"
		for k := range wrap {
			if k != "conditions" {
				return nil, bad("."+field+"."+k, "is not known: a field's filter is {\"conditions\": {…}}")
			}
		}
		if !present(wrap["conditions"]) {
			continue
		}
		var conds map[string]json.RawMessage
		if err := json.Unmarshal(wrap["conditions"], &conds); err != nil {
			return nil, bad(where, "must be an object of conditions ("+strings.Join(filterOps, ", ")+")")
		}
		ops := make([]string, 0, len(conds))
		for op := range conds {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		for _, op := range ops {
			if !contains(filterOps, op) {
				return nil, bad(where+"."+op, "is not a condition filters take; they take "+strings.Join(filterOps, ", "))
			}
			fc := fieldCond{field: field, op: op}
			if op != "$has_value" && op != "$is_unknown" {
				vals, err := filterValues(conds[op])
				if err != nil {
					return nil, bad(where+"."+op, err.Error())
				}
				for _, x := range vals {
					if enum != nil && !contains(enum, x) {
						return nil, bad(where+"."+op, x+" is not one of "+strings.Join(enum, ", "))
					}
				}
				if (op == "$is" || op == "$is_not") && len(vals) > 1 {
					vals = vals[:1] // the reference: only the first value counts
				}
				fc.values = vals
			}
			f.conds = append(f.conds, fc)
		}
	}
	return f, nil
}

// filterValues reads a condition's values: an array of strings, or one.
func filterValues(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || len(many) == 0 {
		return nil, errString("must be an array of one or more strings")
	}
	return many, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// present says whether a field of the request is given (not absent, not null).
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// admits says whether c passes the filter; nil admits all.
func (f *filter) admits(c *offer) bool {
	if f == nil || len(f.conds) == 0 {
		return true
	}
	for _, fc := range f.conds {
		ok := fc.holds(c.filterValues(fc.field))
		if f.or && ok {
			return true
		}
		if !f.or && !ok {
			return false
		}
	}
	return !f.or
}

func (fc fieldCond) holds(have []string) bool {
	hit := false
	for _, h := range have {
		if contains(fc.values, h) {
			hit = true
		}
	}
	switch fc.op {
	case "$is", "$in":
		return hit
	case "$is_not", "$not_in":
		return !hit
	case "$has_value":
		return len(have) > 0
	}
	return len(have) == 0 // $is_unknown
}

// filterValues are the values a filter's field has for the redeemable;
// none: unknown.
func (c *offer) filterValues(field string) []string {
	var out []string
	add := func(s string) {
		if s != "" && !contains(out, s) {
			out = append(out, s)
		}
	}
	switch field {
	case "category_id":
		add(c.categoryID)
	case "campaign_id":
		add(c.campaignID())
	case "campaign_type":
		if c.campaign != nil {
			add(c.campaign.CampaignType)
		}
	case "resource_id":
		add(c.req.ID) // the code, for a voucher
		add(c.objectID)
	case "resource_type":
		add(c.req.Object)
	case "voucher_type":
		if c.voucher != nil {
			add(c.voucher.Type)
		}
		if c.card != nil {
			add("LOYALTY_CARD")
		}
	case "code":
		if c.voucher != nil {
			add(c.voucher.Code)
		}
		if c.card != nil {
			add(c.card.Card.Code)
		}
	case "holder_role":
		add(c.holderRole())
	}
	return out
}

// holderRole is the customer's role as the holder of a wallet's voucher:
// the referrer of a referral code, the owner of any other; "" for a
// promotion tier, which no one holds.
func (c *offer) holderRole() string {
	if c.card != nil {
		return "OWNER" // a card of the customer's own (the wallet's)
	}
	if c.voucher == nil || c.voucher.HolderID == nil {
		return ""
	}
	if c.campaign != nil && c.campaign.CampaignType == "REFERRAL_PROGRAM" {
		return "REFERRER"
	}
	return "OWNER"
}
