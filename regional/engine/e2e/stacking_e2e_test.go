package e2e_test

import (
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A project's stacking rules, set through the management API, govern its
// validations and redemptions: PARTIAL application, the applicable limit,
// skipping redeemables without effect, percents of the initial amount;
// DELETE restores the defaults.
func TestStackingRulesOfTheProject(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	mgmt := func(method, path string, body any) stacktest.Resp {
		return a.E.Do(t, method, "http://api.localhost/management/v1/projects/"+a.P.ID+"/stacking-rules"+path, a.E.MgmtHeader(), body)
	}
	l := mgmt("GET", "", nil)
	defaults := l.JSON(t)["data"].([]any)[0].(map[string]any)
	if l.Status != 200 || defaults["redeemables_application_mode"] != "ALL" || stacktest.Num(defaults["applicable_redeemables_limit"]) != 5 {
		t.Fatalf("defaults: %d %s", l.Status, l.Body)
	}
	for _, bad := range []map[string]any{{"redeemables_limit": 31}, {"redeemables_application_mode": "SOME"},
		{"applicable_redeemables_limit": 9, "redeemables_limit": 3}, {"no_such_rule": true}} {
		if r := mgmt("POST", "", bad); r.Status != 400 {
			t.Fatalf("bad rules %v: %d %s", bad, r.Status, r.Body)
		}
	}
	c := mgmt("POST", "", map[string]any{"redeemables_application_mode": "PARTIAL", "applicable_redeemables_limit": 2,
		"redeemables_no_effect_rule": "SKIP", "discount_calculation_mode": "INITIAL_AMOUNT"})
	rules := c.JSON(t)
	if c.Status != 200 || rules["redeemables_application_mode"] != "PARTIAL" || stacktest.Num(rules["redeemables_limit"]) != 30 {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	if r := mgmt("POST", "", map[string]any{}); r.Status != 409 {
		t.Fatalf("a second create: %d %s", r.Status, r.Body)
	}
	id := rules["id"].(string)
	a.Voucher("TEN", stacktest.PercentOff(10))
	a.Voucher("TWENTY", stacktest.PercentOff(20))
	a.Voucher("THIRTY", stacktest.PercentOff(30))
	a.Voucher("OFF", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "active": false})
	a.Voucher("NOTHING", map[string]any{"discount": map[string]any{"type": "FIXED", "fixed_amount": 100000}})
	body := map[string]any{"redeemables": redeemables("OFF", "NOTHING", "TEN", "TWENTY", "THIRTY"), "order": stacktest.Order([2]int{10000, 1})}
	var v map[string]any
	// The rules reach the region with the directory's next poll.
	stacktest.Eventually(t, 10*time.Second, "the project's stacking rules", func() bool {
		v = a.OK("POST", "/v1/validations", body)
		return v["stacking_rules"].(map[string]any)["redeemables_application_mode"] == "PARTIAL"
	})
	status := map[string]string{}
	for _, r := range v["redeemables"].([]any) {
		m := r.(map[string]any)
		status[m["id"].(string)] = m["status"].(string)
	}
	// OFF inapplicable (but PARTIAL: the rest apply); NOTHING has no
	// effect and is skipped; TEN and TWENTY apply, both of the initial
	// 10000; THIRTY is past the limit of two.
	if v["valid"] != true || status["OFF"] != "INAPPLICABLE" || status["NOTHING"] != "SKIPPED" || status["TEN"] != "APPLICABLE" ||
		status["TWENTY"] != "APPLICABLE" || status["THIRTY"] != "SKIPPED" || stacktest.Num(v["order"].(map[string]any)["discount_amount"]) != 3000 {
		t.Fatalf("validation under the project's rules: %v %v", status, v["order"])
	}
	r := a.OK("POST", "/v1/redemptions", body)
	if len(r["redemptions"].([]any)) != 2 || len(r["inapplicable_redeemables"].([]any)) != 1 {
		t.Fatalf("partial redemption: %v", r)
	}
	if off := a.OK("GET", "/v1/vouchers/OFF", nil); stacktest.Num(off["redemption"].(map[string]any)["redeemed_quantity"]) != 0 {
		t.Fatalf("the inapplicable voucher was counted: %v", off["redemption"])
	}
	if g := mgmt("GET", "/"+id, nil); g.Status != 200 {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	if u := mgmt("PUT", "/"+id, map[string]any{"applicable_redeemables_limit": 3}); u.Status != 200 ||
		u.JSON(t)["redeemables_application_mode"] != "PARTIAL" || stacktest.Num(u.JSON(t)["applicable_redeemables_limit"]) != 3 {
		t.Fatalf("update: %d %s", u.Status, u.Body)
	}
	if d := mgmt("DELETE", "/"+id, nil); d.Status != 204 {
		t.Fatalf("delete: %d %s", d.Status, d.Body)
	}
	if g := mgmt("GET", "/"+id, nil); g.Status != 404 {
		t.Fatalf("after delete: %d %s", g.Status, g.Body)
	}
	stacktest.Eventually(t, 10*time.Second, "the defaults again", func() bool {
		v = a.OK("POST", "/v1/validations", body)
		return v["valid"] == false
	})
}

// The category rules: a redeemable of an exclusive category leaves out the
// others but those of joint categories; a category keeps at most its limit.
func TestStackingRulesOnCategories(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	cat := func(name string) string {
		return a.OK("POST", "/v1/categories", map[string]any{"name": name})["id"].(string)
	}
	excl, joint, plain := cat("Exclusive"), cat("Joint"), cat("Plain")
	for code, c := range map[string]string{"EX-1": excl, "EX-2": excl, "JO-1": joint, "PL-1": plain, "PL-2": plain} {
		body := stacktest.PercentOff(5)
		body["category_id"] = c
		a.Voucher(code, body)
	}
	a.Voucher("NONE", stacktest.PercentOff(5))
	r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/stacking-rules", a.E.MgmtHeader(),
		map[string]any{"exclusive_categories": []any{excl}, "joint_categories": []any{joint}, "applicable_redeemables_limit": 10,
			"redeemables_application_mode": "PARTIAL"})
	if r.Status != 200 {
		t.Fatalf("rules: %d %s", r.Status, r.Body)
	}
	statuses := func(codes ...string) map[string]string {
		v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables(codes...), "order": stacktest.Order([2]int{10000, 1})})
		out := map[string]string{}
		for _, x := range v["redeemables"].([]any) {
			m := x.(map[string]any)
			out[m["id"].(string)] = m["status"].(string)
			if d, ok := m["result"].(map[string]any)["details"].(map[string]any); ok && m["status"] == "SKIPPED" {
				out[m["id"].(string)] += ":" + d["key"].(string)
			}
		}
		return out
	}
	stacktest.Eventually(t, 10*time.Second, "the project's rules", func() bool {
		return statuses("EX-1", "PL-1")["PL-1"] == "SKIPPED:exclusion_rules_not_met"
	})
	got := statuses("PL-1", "EX-1", "EX-2", "JO-1", "NONE")
	want := map[string]string{"EX-1": "APPLICABLE", "EX-2": "SKIPPED:exclusion_rules_not_met", "JO-1": "APPLICABLE",
		"PL-1": "SKIPPED:exclusion_rules_not_met", "NONE": "SKIPPED:exclusion_rules_not_met"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("with an exclusive one, %s: %s, want %s", k, got[k], w)
		}
	}
	// No exclusive one: the per-category limit (1 by default) holds.
	got = statuses("PL-1", "PL-2", "NONE", "JO-1")
	want = map[string]string{"PL-1": "APPLICABLE", "PL-2": "SKIPPED:applicable_redeemables_per_category_limit_exceeded",
		"NONE": "APPLICABLE", "JO-1": "APPLICABLE"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("per category, %s: %s, want %s", k, got[k], w)
		}
	}
}

// With redeemables_sorting_rule CATEGORY_HIERARCHY redeemables apply in
// their categories' hierarchy (the lowest first, those without a category
// last), whatever the requested order: what applies first is taken off
// the full amount, and what comes past the applicable limit is skipped.
func TestCategoryHierarchySorting(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	second := a.OK("POST", "/v1/categories", map[string]any{"name": "Second", "hierarchy": 2})["id"].(string)
	first := a.OK("POST", "/v1/categories", map[string]any{"name": "First", "hierarchy": 1})["id"].(string)
	amount := map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1000}, "category_id": second}
	a.Voucher("AMOUNT-2ND", amount)
	tenth := stacktest.PercentOff(10)
	tenth["category_id"] = first
	a.Voucher("PERCENT-1ST", tenth)
	a.Voucher("PERCENT-NONE", stacktest.PercentOff(50))
	total := func(codes ...string) (float64, map[string]any) {
		v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables(codes...), "order": stacktest.Order([2]int{10000, 1})})
		return v["order"].(map[string]any)["total_discount_amount"].(float64), v
	}
	// The requested order: 1000 off 10000, then 10% of 9000.
	if got, v := total("AMOUNT-2ND", "PERCENT-1ST"); got != 1900 {
		t.Fatalf("in the requested order: %v (%v)", got, v)
	}
	mgmt := func(body map[string]any) {
		if r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/stacking-rules", a.E.MgmtHeader(), body); r.Status != 200 {
			t.Fatalf("rules: %d %s", r.Status, r.Body)
		}
	}
	mgmt(map[string]any{"redeemables_sorting_rule": "CATEGORY_HIERARCHY", "applicable_redeemables_limit": 2})
	// By hierarchy: 10% of 10000, then 1000 off; the uncategorised one is
	// last, past the limit of two.
	var v map[string]any
	stacktest.Eventually(t, 10*time.Second, "the hierarchy in force", func() bool {
		var got float64
		got, v = total("PERCENT-NONE", "AMOUNT-2ND", "PERCENT-1ST")
		return got == 2000
	})
	status := map[string]string{}
	for i, r := range v["redeemables"].([]any) {
		m := r.(map[string]any)
		status[m["id"].(string)] = m["status"].(string)
		if want := []string{"PERCENT-NONE", "AMOUNT-2ND", "PERCENT-1ST"}[i]; m["id"] != want {
			t.Fatalf("the answer lists the redeemables as requested: %v", v["redeemables"])
		}
	}
	if status["PERCENT-NONE"] != "SKIPPED" || status["AMOUNT-2ND"] != "APPLICABLE" || status["PERCENT-1ST"] != "APPLICABLE" {
		t.Fatalf("by hierarchy: %v", status)
	}
	// A redemption applies them in the same order.
	red := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("AMOUNT-2ND", "PERCENT-1ST"), "order": stacktest.Order([2]int{10000, 1})})
	if got := red["order"].(map[string]any)["total_discount_amount"]; got != 2000.0 {
		t.Fatalf("redemption by hierarchy: %v", red["order"])
	}
}
