package apiversion

import (
	"encoding/json"
	"net/http"
)

// Changes are the interface's differences between versions, as transforms
// of the routes they concern. Handlers serve the newest shapes; these take
// them back for requests of older versions.
var Changes = []Transform{
	// v2017-04-20: publishing answers a publication; before, the voucher.
	{Method: http.MethodPost, Route: "/v1/publications", Since: "v2017-04-20", Response: PublicationToVoucher},
	{Method: http.MethodGet, Route: "/v1/publications/create", Since: "v2017-04-20", Response: PublicationToVoucher},
	// v2018-08-01: promotion tiers carry validation_rule_assignments; before,
	// a conditions object.
	{Method: http.MethodGet, Route: "/v1/promotions/tiers", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodGet, Route: "/v1/promotions/:campaignId/tiers", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodPost, Route: "/v1/promotions/:campaignId/tiers", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodGet, Route: "/v1/promotions/tiers/:tierId", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodPut, Route: "/v1/promotions/tiers/:tierId", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodPost, Route: "/v1/promotions/tiers/:tierId/enable", Since: "v2018-08-01", Response: TiersToConditions},
	{Method: http.MethodPost, Route: "/v1/promotions/tiers/:tierId/disable", Since: "v2018-08-01", Response: TiersToConditions},
}

// Interface returns a registry holding Changes: the one a service mounts.
func Interface() *Registry {
	r := NewRegistry()
	for _, t := range Changes {
		r.Add(t)
	}
	return r
}

// PublicationToVoucher takes a publication answer back to the bare voucher
// that versions before v2017-04-20 answered. Errors, and an answer with no
// voucher, pass unchanged.
func PublicationToVoucher(status int, body []byte) ([]byte, error) {
	if status < 200 || status > 299 {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body, nil
	}
	if v, ok := m["voucher"]; ok && len(v) > 0 && v[0] == '{' {
		return v, nil
	}
	return body, nil
}

// TiersToConditions takes promotion tiers (one, or a list's tiers) back to
// the shape before v2018-08-01: a conditions object in place of
// validation_rule_assignments, naming the assigned rules' ids
// (conditions.validation_rules) as the rules model of that time named the
// rules a tier checked.
func TiersToConditions(status int, body []byte) ([]byte, error) {
	if status < 200 || status > 299 {
		return body, nil
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return body, nil
	}
	tier := func(t map[string]any) {
		as, _ := t["validation_rule_assignments"].(map[string]any)
		rules := []any{}
		if data, _ := as["data"].([]any); data != nil {
			for _, a := range data {
				if am, ok := a.(map[string]any); ok {
					rules = append(rules, am["rule_id"])
				}
			}
		}
		delete(t, "validation_rule_assignments")
		t["conditions"] = map[string]any{"validation_rules": rules}
	}
	if m["object"] == "promotion_tier" {
		tier(m)
	} else if ts, ok := m["tiers"].([]any); ok {
		for _, t := range ts {
			if tm, ok := t.(map[string]any); ok {
				tier(tm)
			}
		}
	} else {
		return body, nil
	}
	return json.Marshal(m)
}
