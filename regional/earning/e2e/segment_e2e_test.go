package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Earning rules on customer.segment.entered name an auto-update segment;
// a member entering it while a rule is active earns the rule's points,
// FIXED or PROPORTIONAL to a number in their metadata, once per entry,
// while an inactive rule gives nothing.
func TestSegmentEntryEarns(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Segment earners", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})["id"].(string)
	static := a.OK("POST", "/v1/segments", map[string]any{"name": "Friends", "type": "static", "customers": []any{"ann"}})["id"].(string)
	rules := "/v1/loyalties/" + campID + "/earning-rules"
	entered := func(seg any, loyalty map[string]any, extra map[string]any) map[string]any {
		r := map[string]any{"event": "customer.segment.entered", "loyalty": loyalty}
		if seg != nil {
			r["segment"] = map[string]any{"id": seg}
		}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	fixed := func(n int) map[string]any { return map[string]any{"type": "FIXED", "points": n} }
	a.Fails("POST", rules, []any{entered(nil, fixed(5), nil)}, 400, "invalid_payload")
	a.Fails("POST", rules, []any{entered(static, fixed(5), nil)}, 400, "invalid_payload")
	a.Fails("POST", rules, []any{entered("seg_none", fixed(5), nil)}, 404, "not_found")
	a.Fails("POST", rules, []any{entered(gold, map[string]any{"type": "PROPORTIONAL", "calculation_type": "ORDER_AMOUNT"}, nil)},
		400, "invalid_payload")
	made := a.Do("POST", rules, []any{
		entered(gold, fixed(50), nil),
		entered(gold, map[string]any{"type": "PROPORTIONAL", "calculation_type": "CUSTOMER_METADATA",
			"customer": map[string]any{"metadata": map[string]any{"every": 10, "points": 1, "property": "spend"}}}, nil),
		entered(gold, fixed(1000), map[string]any{"active": false}),
	})
	if made.Status != 200 {
		t.Fatalf("rules: %d %s", made.Status, made.Body)
	}
	var views []map[string]any
	if err := json.Unmarshal(made.Body, &views); err != nil || len(views) != 3 {
		t.Fatalf("rules: %v %s", err, made.Body)
	}
	if s := views[0]["segment"].(map[string]any); s["id"] != gold || views[0]["event"] != "customer.segment.entered" {
		t.Fatalf("rule view: %v", views[0])
	}
	points := func() float64 { return card(a.OK("GET", "/v1/loyalties/members/"+code, nil))["points"].(float64) }
	// Ann turns gold with 254 spent: 50 + 25.
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"tier": "gold", "spend": 254}})
	stacktest.Eventually(t, 10*time.Second, "the entry's accrual", func() bool { return points() == 75 })
	// Staying gold earns nothing more; leaving and entering again earns again.
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"tier": "gold", "spend": 300}})
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"tier": "silver", "spend": 300}})
	time.Sleep(500 * time.Millisecond)
	if p := points(); p != 75 {
		t.Fatalf("points %v after an update within the segment and leaving it, want 75", p)
	}
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"tier": "gold", "spend": 300}})
	stacktest.Eventually(t, 10*time.Second, "the second entry's accrual", func() bool { return points() == 155 })
	tx := a.History(code)[0]
	stacktest.CheckTx(t, tx, "POINTS_ACCRUAL", "balance", "earning_rule", "segment")
}
