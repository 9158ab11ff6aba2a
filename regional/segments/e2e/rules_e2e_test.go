package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A validation rule on customer.segment admits a customer in the segment
// and refuses one outside it, as membership changes: a static segment's
// stored members, an auto-update segment's filter evaluated on the
// customer as stored and as the request gives them.
func TestValidationRuleOnSegment(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"tier": "gold"}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "metadata": map[string]any{"tier": "silver"}})
	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})["id"].(string)
	friends := a.OK("POST", "/v1/segments", map[string]any{"name": "Friends", "type": "static", "customers": []any{"bob"}})["id"].(string)
	guard := func(code, segment string) {
		v := a.Voucher(code, stacktest.PercentOff(10))
		rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": code, "type": "advanced",
			"rules": map[string]any{"1": map[string]any{"name": "customer.segment", "conditions": map[string]any{"$is": []any{segment}}},
				"logic": "1"}})
		a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments",
			map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	}
	guard("GOLD10", gold)
	guard("FRIENDS10", friends)
	valid := func(code string, customer map[string]any) bool {
		r := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"order": stacktest.Order([2]int{5000, 1}), "customer": customer})
		return r["valid"] == true
	}
	src := func(s string) map[string]any { return map[string]any{"source_id": s} }
	if !valid("GOLD10", src("ann")) || valid("GOLD10", src("bob")) {
		t.Fatal("GOLD10: ann (gold) must pass and bob (silver) must not")
	}
	if valid("FRIENDS10", src("ann")) || !valid("FRIENDS10", src("bob")) {
		t.Fatal("FRIENDS10: bob (a friend) must pass and ann must not")
	}
	// Ann turns silver: refused at once (evaluated live, not waiting for
	// the stored membership).
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"tier": "silver"}})
	if valid("GOLD10", src("ann")) {
		t.Fatal("GOLD10: ann is silver now")
	}
	// A request's customer data counts: a new customer sent as gold passes.
	if !valid("GOLD10", map[string]any{"source_id": "cy", "metadata": map[string]any{"tier": "gold"}}) {
		t.Fatal("GOLD10: cy comes as gold")
	}
	// Bob deleted and made again is no longer a friend: a static segment is
	// frozen.
	a.Do("DELETE", "/v1/customers/bob", nil)
	if valid("FRIENDS10", src("bob")) {
		t.Fatal("FRIENDS10: the new bob is not the friend")
	}
}
