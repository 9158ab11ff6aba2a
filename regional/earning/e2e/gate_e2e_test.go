package e2e_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// rule creates one earning rule of a campaign.
func rule(a stacktest.API, campID string, body map[string]any) map[string]any {
	a.T.Helper()
	r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{body})
	var out []map[string]any
	if r.Status != 200 || json.Unmarshal(r.Body, &out) != nil || len(out) != 1 {
		a.T.Fatalf("earning rule: %d %s", r.Status, r.Body)
	}
	return out[0]
}

// fixed is an order.paid rule of pts points, with extra fields.
func fixed(pts int, extra map[string]any) map[string]any {
	b := map[string]any{"event": "order.paid", "loyalty": map[string]any{"type": "FIXED", "points": pts}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// earned waits for n accruals on code and answers the points of each by rule.
func earned(t *testing.T, a stacktest.API, code string, n int) map[string]float64 {
	t.Helper()
	stacktest.Eventually(t, 10*time.Second, fmt.Sprintf("%d accruals", n), func() bool { return len(a.History(code)) >= n })
	out := map[string]float64{}
	for _, tx := range a.History(code) {
		d := tx["details"].(map[string]any)
		if r, ok := d["earning_rule"].(map[string]any); ok {
			out[r["id"].(string)] += d["balance"].(map[string]any)["points"].(float64)
		}
	}
	if len(a.History(code)) != n {
		t.Fatalf("want %d accruals, got %v", n, a.History(code))
	}
	return out
}

func TestEarningRuleWithAValidationRuleEarnsOnlyWhenTheOrderMeetsIt(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Gated", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	a.Fails("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{fixed(10, map[string]any{"validation_rule_id": "val_nope"})},
		404, "not_found")
	a.Fails("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{fixed(10, map[string]any{"validation_rule_id": 7})},
		400, "invalid_payload")
	big := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Big orders",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []int{5000}}}, "logic": "1"}})
	gated := rule(a, campID, fixed(10, map[string]any{"validation_rule_id": big["id"]}))
	witness := rule(a, campID, fixed(1, nil))
	if gated["validation_rule_id"] != big["id"] {
		t.Fatalf("rule: %v", gated)
	}
	// The assignment the reference lists beside the rule.
	as := a.OK("GET", "/v1/validation-rules-assignments?related_object_id="+gated["id"].(string), nil)["data"].([]any)
	if len(as) != 1 || as[0].(map[string]any)["related_object_type"] != "earning_rule" || as[0].(map[string]any)["rule_id"] != big["id"] {
		t.Fatalf("assignments: %v", as)
	}

	// A small order: the witness earns, the gated rule does not.
	a.OK("POST", "/v1/orders", map[string]any{"source_id": "small", "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "ann"}})
	if got := earned(t, a, code, 1); got[witness["id"].(string)] != 1 || got[gated["id"].(string)] != 0 {
		t.Fatalf("small order earned %v", got)
	}
	// A big one: both.
	a.OK("POST", "/v1/orders", map[string]any{"source_id": "big", "status": "PAID", "amount": 9000, "customer": map[string]any{"source_id": "ann"}})
	if got := earned(t, a, code, 3); got[witness["id"].(string)] != 2 || got[gated["id"].(string)] != 10 {
		t.Fatalf("big order earned %v", got)
	}

	// null drops the rule and its assignment; naming it again and deleting
	// the earning rule drops the assignment too.
	if u := a.OK("PUT", "/v1/loyalties/"+campID+"/earning-rules/"+gated["id"].(string), map[string]any{"validation_rule_id": nil}); u["validation_rule_id"] != nil {
		t.Fatalf("dropped: %v", u)
	}
	if as := a.OK("GET", "/v1/validation-rules-assignments?related_object_id="+gated["id"].(string), nil)["data"].([]any); len(as) != 0 {
		t.Fatalf("assignments after null: %v", as)
	}
	a.OK("PUT", "/v1/loyalties/"+campID+"/earning-rules/"+gated["id"].(string), map[string]any{"validation_rule_id": big["id"]})
	if r := a.Do("DELETE", "/v1/loyalties/"+campID+"/earning-rules/"+gated["id"].(string), nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if as := a.OK("GET", "/v1/validation-rules-assignments?related_object_id="+gated["id"].(string), nil)["data"].([]any); len(as) != 0 {
		t.Fatalf("assignments after delete: %v", as)
	}
}

func TestEarningRulesEarnOnlyInsideTheirValidityWindows(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Windows", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	now := time.Now().UTC()
	hm := func(d time.Duration) string { return now.Add(d).Format("15:04") }
	day := func(d time.Duration) int { return int(now.Add(d).Weekday()) }
	hours := func(from, to time.Duration) map[string]any {
		return map[string]any{"daily": []map[string]any{{"start_time": hm(from), "expiration_time": hm(to),
			"days_of_week": []int{0, 1, 2, 3, 4, 5, 6}}}}
	}
	timeframe := map[string]any{"interval": "P1D", "duration": "PT2H"}
	in := map[string]map[string]any{
		"day":       rule(a, campID, fixed(1, map[string]any{"validity_day_of_week": []int{day(0)}})),
		"hours":     rule(a, campID, fixed(4, map[string]any{"validity_hours": hours(-time.Hour, time.Hour)})),
		"timeframe": rule(a, campID, fixed(16, map[string]any{"validity_timeframe": timeframe, "start_date": now.Add(-30 * time.Minute)})),
	}
	out := map[string]map[string]any{
		"day":       rule(a, campID, fixed(2, map[string]any{"validity_day_of_week": []int{day(48 * time.Hour)}})),
		"hours":     rule(a, campID, fixed(8, map[string]any{"validity_hours": hours(2*time.Hour, 3*time.Hour)})),
		"timeframe": rule(a, campID, fixed(32, map[string]any{"validity_timeframe": timeframe, "start_date": now.Add(-3 * time.Hour)})),
	}
	// Read back as written.
	got := a.OK("GET", "/v1/loyalties/"+campID+"/earning-rules/"+in["hours"]["id"].(string), nil)
	if h := got["validity_hours"].(map[string]any)["daily"].([]any)[0].(map[string]any); h["start_time"] != hm(-time.Hour) ||
		h["expiration_time"] != hm(time.Hour) || len(h["days_of_week"].([]any)) != 7 {
		t.Fatalf("validity_hours: %v", got)
	}
	if tf := in["timeframe"]["validity_timeframe"].(map[string]any); tf["interval"] != "P1D" || tf["duration"] != "PT2H" {
		t.Fatalf("validity_timeframe: %v", in["timeframe"])
	}
	if d := in["day"]["validity_day_of_week"].([]any); len(d) != 1 || d[0] != float64(day(0)) {
		t.Fatalf("validity_day_of_week: %v", in["day"])
	}

	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "ann"}})
	earnt := earned(t, a, code, 3)
	for w, r := range in {
		if earnt[r["id"].(string)] != r["loyalty"].(map[string]any)["points"].(float64) {
			t.Errorf("the %s rule, inside its window, earned %v", w, earnt)
		}
	}
	for w, r := range out {
		if earnt[r["id"].(string)] != 0 {
			t.Errorf("the %s rule, outside its window, earned %v", w, earnt)
		}
	}
}

func TestEarningRulesRefuseBadWindows(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Strict", nil)["id"].(string)
	path := "/v1/loyalties/" + campID + "/earning-rules"
	for name, extra := range map[string]map[string]any{
		"timeframe without duration":  {"validity_timeframe": map[string]any{"interval": "P2D"}},
		"timeframe longer than cycle": {"validity_timeframe": map[string]any{"interval": "P1D", "duration": "P2D"}},
		"timeframe not ISO":           {"validity_timeframe": map[string]any{"interval": "2 days", "duration": "PT1H"}},
		"day 7":                       {"validity_day_of_week": []int{7}},
		"hours past 24":               {"validity_hours": map[string]any{"daily": []map[string]any{{"start_time": "25:00", "expiration_time": "26:00"}}}},
		"hours without end":           {"validity_hours": map[string]any{"daily": []map[string]any{{"start_time": "10:00"}}}},
	} {
		e := a.Fails("POST", path, []map[string]any{fixed(1, extra)}, 400, "invalid_payload")
		if d, _ := e["details"].(string); len(d) < 5 || d[:4] != "[0]." {
			t.Errorf("%s: details %q do not name the field", name, d)
		}
	}
}
