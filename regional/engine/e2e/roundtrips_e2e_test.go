package e2e_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A stacked validation of a stored customer named by source_id, a voucher
// with a rule, a gift card and a promotion tier with a rule reads what it
// needs in two round trips to the database: the customer, the vouchers
// and the tier in one batch, then what judging them needs (campaigns,
// sessions, rules and the rules' versions). A redemption of the same
// writes in four (TestARedemptionWritesInFourRoundTrips).
func TestAValidationReadsInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 10", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{1000}}}, "logic": "1"}})
	v := a.Voucher("TEN", stacktest.PercentOff(10))
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	a.Voucher("GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 2000}})
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{
		map[string]any{"name": "Ruled", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 50}},
			"validation_rules": []any{rule["id"]}}}}})
	tier := c["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"]
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})
	body := map[string]any{"customer": map[string]any{"source_id": "ann"}, "order": stacktest.Order([2]int{5000, 1}),
		"redeemables": []any{map[string]any{"object": "voucher", "id": "TEN"}, map[string]any{"object": "voucher", "id": "GIFT"},
			map[string]any{"object": "promotion_tier", "id": tier}}}
	// The first prepares the statements.
	if first := a.OK("POST", "/v1/validations", body); first["valid"] != true {
		t.Fatalf("validation: %v", first)
	}
	r, trips := a.RoundTrips("POST", "/v1/validations", body, "engine.Validate")
	if r.Status != 200 || r.JSON(t)["valid"] != true {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if len(trips) != 2 {
		t.Fatalf("%d round trips, want 2:\n%s", len(trips), strings.Join(trips, "\n---\n"))
	}
	// A customer no one stored, named by source_id, is the one the request
	// describes, read in the same two: the first batch found no one.
	body["customer"] = map[string]any{"source_id": "newcomer", "metadata": map[string]any{"vip": true}}
	r, trips = a.RoundTrips("POST", "/v1/validations", body, "engine.Validate")
	if r.Status != 200 || r.JSON(t)["valid"] != true {
		t.Fatalf("a new customer: %d %s", r.Status, r.Body)
	}
	if len(trips) != 2 {
		t.Fatalf("a new customer: %d round trips, want 2:\n%s", len(trips), strings.Join(trips, "\n---\n"))
	}
	body["customer"] = map[string]any{"source_id": "ann"}
	redeemsIn(t, a, 4, "a stacked redemption of the same", body)
}

// A redemption writes in four round trips to the database, the BEGIN and
// the COMMIT riding with statements: the customer's upsert with the BEGIN,
// the redeemables' batch, judging's batch, and the order, the counts, the
// redemptions and their notices with the COMMIT. So for a discount voucher
// without a quantity (counted on its row), one with a quantity once its
// shards were granted some (counted on a shard), and a gift card (locked
// at read).
func TestARedemptionWritesInFourRoundTrips(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Voucher("PLAIN", stacktest.PercentOff(10))
	a.Voucher("LIMITED", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": 1000}})
	a.Voucher("GIFTED", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 100000}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob"})
	body := func(code string) map[string]any {
		return map[string]any{"customer": map[string]any{"source_id": "bob"}, "order": stacktest.Order([2]int{5000, 1}),
			"redeemables": []any{map[string]any{"object": "voucher", "id": code}}}
	}
	for _, code := range []string{"PLAIN", "LIMITED", "GIFTED"} {
		// The first prepares the statements (and grants LIMITED's shards).
		a.OK("POST", "/v1/redemptions", body(code))
		redeemsIn(t, a, 4, "a redemption of "+code, body(code))
	}
	// A code of quantity 1 is counted on its row, whose read goes with the
	// writes and whose count with the COMMIT: one round trip more.
	for _, code := range []string{"ONCE1", "ONCE2"} {
		a.Voucher(code, map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
			"redemption": map[string]any{"quantity": 1}})
	}
	a.OK("POST", "/v1/redemptions", body("ONCE1"))
	redeemsIn(t, a, 5, "a redemption of a code of quantity 1", body("ONCE2"))
}

// redeemsIn redeems body and fails unless it took want round trips.
func redeemsIn(t *testing.T, a stacktest.API, want int, what string, body map[string]any) {
	t.Helper()
	r, trips := a.RoundTrips("POST", "/v1/redemptions", body, "engine.Redeem")
	if r.Status != 200 {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	if len(trips) != want {
		t.Errorf("%s: %d round trips, want %d:\n%s", what, len(trips), want, strings.Join(trips, "\n---\n"))
	}
}
