package e2e_test

import (
	"encoding/json"
	"testing"
)

// A tier's views: the earning rules that earn for its members and the
// rewards its members can buy, each at the tier's terms (a rule's points
// and a reward's price as the tier maps them), the rules scoped to another
// tier left out; 404 for a tier that is not the program's.
func TestATiersEarningRulesAndRewardsAreItsTerms(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Tiered", nil)["id"].(string)
	otherID := a.Campaign("Other", nil)["id"].(string)
	var rules []map[string]any
	r := a.Do("POST", "/v1/loyalties/"+progID+"/earning-rules", []map[string]any{
		{"event": "order.paid", "loyalty": map[string]any{"type": "FIXED", "points": 10}},
		{"event": "order.paid", "loyalty": map[string]any{"type": "PROPORTIONAL", "calculation_type": "ORDER_AMOUNT",
			"order": map[string]any{"amount": map[string]any{"every": 100, "points": 3}}}},
	})
	if r.Status != 200 || json.Unmarshal(r.Body, &rules) != nil {
		t.Fatalf("rules: %d %s", r.Status, r.Body)
	}
	fixed, prop := rules[0]["id"].(string), rules[1]["id"].(string)
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})["id"].(string)
	cap := a.OK("POST", "/v1/rewards", map[string]any{"name": "Cap", "parameters": map[string]any{"product": map[string]any{"id": "prod_cap"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+progID+"/rewards", []map[string]any{{"reward": mug, "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}}})
	a.OK("POST", "/v1/loyalties/"+progID+"/rewards", []map[string]any{{"reward": cap, "parameters": map[string]any{"loyalty": map[string]any{"points": 40}}}})
	var ts []map[string]any
	r = a.Do("POST", "/v1/loyalties/"+progID+"/tiers", []map[string]any{
		{"name": "Bronze", "points": map[string]any{"from": 0, "to": 99}},
		{"name": "Gold", "points": map[string]any{"from": 100},
			"earning_rules": map[string]any{fixed: map[string]any{"type": "CUSTOM", "points": 25}, prop: map[string]any{"type": "MULTIPLY", "multiplier": 2}},
			"rewards":       map[string]any{mug: map[string]any{"type": "MULTIPLY", "multiplier": 0.5}}},
	})
	if r.Status != 200 || json.Unmarshal(r.Body, &ts) != nil {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	bronze, gold := ts[0]["id"].(string), ts[1]["id"].(string)
	// A rule scoped to Bronze: in Bronze's list, not in Gold's.
	scoped := a.Do("POST", "/v1/loyalties/"+progID+"/earning-rules", []map[string]any{{"event": "order.paid",
		"loyalty_tier": map[string]any{"id": bronze}, "loyalty": map[string]any{"type": "FIXED", "points": 7}}})
	var sc []map[string]any
	if scoped.Status != 200 || json.Unmarshal(scoped.Body, &sc) != nil {
		t.Fatalf("scoped rule: %d %s", scoped.Status, scoped.Body)
	}

	tierRules := func(tier string) map[string]map[string]any {
		t.Helper()
		l := a.OK("GET", "/v1/loyalties/"+progID+"/tiers/"+tier+"/earning-rules", nil)
		out := map[string]map[string]any{}
		for _, d := range l["data"].([]any) {
			m := d.(map[string]any)
			out[m["id"].(string)] = m["loyalty"].(map[string]any)
		}
		if l["object"] != "list" || l["data_ref"] != "data" || l["total"] != float64(len(out)) {
			t.Fatalf("tier %s's rules: %v", tier, l)
		}
		return out
	}
	g := tierRules(gold)
	if len(g) != 2 || g[fixed]["points"] != 25.0 ||
		g[prop]["order"].(map[string]any)["amount"].(map[string]any)["points"] != 6.0 {
		t.Fatalf("Gold's rules: %v", g)
	}
	b := tierRules(bronze)
	if len(b) != 3 || b[fixed]["points"] != 10.0 || b[sc[0]["id"].(string)]["points"] != 7.0 {
		t.Fatalf("Bronze's rules: %v", b)
	}
	// The program's own list is unmapped.
	if l := a.OK("GET", "/v1/loyalties/"+progID+"/earning-rules/"+fixed, nil); l["loyalty"].(map[string]any)["points"] != 10.0 {
		t.Fatalf("the rule itself: %v", l)
	}
	if p := a.OK("GET", "/v1/loyalties/"+progID+"/tiers/"+gold+"/earning-rules?limit=1&page=2", nil); len(p["data"].([]any)) != 1 || p["total"] != 2.0 {
		t.Fatalf("page 2 of one: %v", p)
	}

	tierPrices := func(tier string) map[string]float64 {
		t.Helper()
		l := a.OK("GET", "/v1/loyalties/"+progID+"/tiers/"+tier+"/rewards", nil)
		out := map[string]float64{}
		for _, d := range l["data"].([]any) {
			m := d.(map[string]any)
			as := m["assignment"].(map[string]any)
			if m["object"] != "loyalty_tier_reward" || as["object"] != "reward_assignment" || m["reward"].(map[string]any)["id"] != as["reward_id"] {
				t.Fatalf("tier reward: %v", m)
			}
			out[as["reward_id"].(string)] = as["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"].(float64)
		}
		return out
	}
	if p := tierPrices(gold); len(p) != 2 || p[mug] != 50 || p[cap] != 40 {
		t.Fatalf("Gold's prices: %v", p)
	}
	if p := tierPrices(bronze); p[mug] != 100 || p[cap] != 40 {
		t.Fatalf("Bronze's prices: %v", p)
	}

	for _, path := range []string{"/earning-rules", "/rewards"} {
		a.Fails("GET", "/v1/loyalties/"+progID+"/tiers/ltr_nope"+path, nil, 404, "not_found")
		a.Fails("GET", "/v1/loyalties/"+otherID+"/tiers/"+gold+path, nil, 404, "not_found")
		a.Fails("GET", "/v1/loyalties/camp_nope/tiers/"+gold+path, nil, 404, "not_found")
	}
	a.Fails("GET", "/v1/loyalties/"+progID+"/tiers/"+gold+"/earning-rules?order=name", nil, 400, "invalid_query_params")
}
