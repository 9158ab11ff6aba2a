package qualifications_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Qualifications: a customer's loyalty card whose campaign offers a COIN
// reward qualifies, paying what it can of the order; a card whose
// campaign offers none, or without points, does not.
func TestQualifiedLoyaltyCardsPayWithPoints(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	payID := a.Campaign("Payers", nil)["id"].(string)
	plainID := a.Campaign("Collectors", nil)["id"].(string)
	payCard := a.Member(payID, "ann")["code"].(string)
	plainCard := a.Member(plainID, "ann")["code"].(string)
	a.Member(payID, "bob") // no points
	for _, c := range []string{payCard, plainCard} {
		a.OK("POST", "/v1/loyalties/members/"+c+"/balance", map[string]any{"points": 300})
	}
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})["id"].(string)
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+payID+"/rewards", map[string]any{"reward": coin})
	a.OK("POST", "/v1/loyalties/"+plainID+"/rewards", map[string]any{"reward": mug, "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}})
	a.Voucher("TEN", stacktest.PercentOff(10))
	codes := func(l map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, d := range l["redeemables"].(map[string]any)["data"].([]any) {
			out[d.(map[string]any)["id"].(string)] = d.(map[string]any)
		}
		return out
	}
	// 300 points pay 3000 of a 5000 order.
	q := codes(a.OK("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "ann"},
		"scenario": "CUSTOMER_WALLET", "order": stacktest.Order([2]int{5000, 1})}))
	got, ok := q[payCard]
	if !ok || len(q) != 1 {
		t.Fatalf("ann's wallet: %v", q)
	}
	lc := got["result"].(map[string]any)["loyalty_card"].(map[string]any)
	if got["object"] != "voucher" || stacktest.Num(lc["points"]) != 300 || stacktest.Num(lc["balance"]) != 300 || stacktest.Num(lc["points_ratio"]) != 10 ||
		lc["exchange_ratio"] != 1.0 || stacktest.Num(got["order"].(map[string]any)["total_amount"]) != 2000 || got["campaign_id"] != payID {
		t.Fatalf("the paying card: %v", got)
	}
	// BEST_DEAL puts the card (3000 off) before TEN (500), which is not the wallet's.
	l := a.OK("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "ann"},
		"order": stacktest.Order([2]int{5000, 1}), "options": map[string]any{"sorting_rule": "BEST_DEAL",
			"filters": map[string]any{"voucher_type": map[string]any{"conditions": map[string]any{"$is": []any{"LOYALTY_CARD"}}}}}})
	if d := l["redeemables"].(map[string]any)["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != payCard {
		t.Fatalf("filtered to loyalty cards: %v", l)
	}
	if q := codes(a.OK("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "bob"},
		"scenario": "CUSTOMER_WALLET", "order": stacktest.Order([2]int{5000, 1})})); len(q) != 0 {
		t.Fatalf("bob's card has no points: %v", q)
	}
	// The qualified card validates as the answer says.
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": payCard,
		"reward": map[string]any{"id": coin}}}, "order": stacktest.Order([2]int{5000, 1})})
	if v["valid"] != true || stacktest.Num(v["order"].(map[string]any)["total_amount"]) != 2000 {
		t.Fatalf("validating the qualified card: %v", v)
	}
}
