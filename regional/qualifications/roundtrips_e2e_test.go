package qualifications_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A qualification of a stored customer named by source_id, holding
// vouchers with rules and a loyalty card that pays with points, over
// promotion tiers with rules, reads what it needs in two round trips to
// the database: the customer and what they hold, then what judging them
// needs (their campaigns, sessions, rules and the rules' versions). The
// project's catalogue, read at most once a second for every
// qualification, is not counted.
func TestAQualificationReadsInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 10", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{1000}}}, "logic": "1"}})
	ruleID := rule["id"].(string)
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Wallet", "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 2,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}})
	a.OK("POST", "/v1/validation-rules/"+ruleID+"/assignments", map[string]any{"related_object_type": "campaign", "related_object_id": c["id"]})
	for range 2 {
		a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Wallet"}, "customer": map[string]any{"source_id": "ann"}})
	}
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{
		map[string]any{"name": "Ruled", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 50}},
			"validation_rules": []any{ruleID}},
		map[string]any{"name": "Plain", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 20}}},
	}}})
	payID := a.Campaign("Payers", nil)["id"].(string)
	card := a.Member(payID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 300})
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+payID+"/rewards", map[string]any{"reward": coin})
	body := map[string]any{"customer": map[string]any{"source_id": "ann"}, "order": stacktest.Order([2]int{5000, 1})}
	// The first reads the catalogue and prepares the statements.
	first := a.OK("POST", "/v1/qualifications", body)
	if n := stacktest.Num(first["redeemables"].(map[string]any)["total"]); n != 5 {
		t.Fatalf("qualified %d, want 2 vouchers, 2 tiers and the card: %v", n, first)
	}
	r, trips := a.RoundTrips("POST", "/v1/qualifications", body, "qualifications.Qualify", "qualifications.catalogue")
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if len(trips) != 2 {
		t.Fatalf("%d round trips, want 2:\n%s", len(trips), strings.Join(trips, "\n---\n"))
	}
}
