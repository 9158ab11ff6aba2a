package e2e_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Every resource with metadata refuses what its project's schema refuses,
// through its own routes, naming the key: 400 metadata_validation_failed.
// Each schema defines level, a number; each request sends it as a string.
func TestMetadataRefusedOnEveryResource(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	level := map[string]any{"level": map[string]any{"type": "number"}}
	resources := []string{"campaign", "customer", "earning_rule", "loyalty_tier", "order", "order_item", "product", "sku",
		"promotion_tier", "publication", "redemption", "reward", "voucher"}

	// What the writes need, made before the schemas exist.
	loyaltyID := a.Campaign("Points", nil)["id"].(string)
	promoID := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION",
		"promotion": map[string]any{"tiers": []any{map[string]any{"name": "All", "action": map[string]any{
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}}}}})["id"].(string)
	productID := a.OK("POST", "/v1/products", map[string]any{"name": "Mug"})["id"].(string)
	a.Voucher("PUB-1", stacktest.PercentOff(10))
	a.Voucher("RED-1", stacktest.PercentOff(10))
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})
	card := a.Member(loyaltyID, "bob")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 100})
	reward := a.OK("POST", "/v1/rewards", map[string]any{"name": "Cup",
		"parameters": map[string]any{"product": map[string]any{"id": productID}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+loyaltyID+"/rewards", []map[string]any{{"reward": reward,
		"parameters": map[string]any{"loyalty": map[string]any{"points": 1}}}})
	order := a.OK("POST", "/v1/orders", map[string]any{"amount": 1000})["id"].(string)
	red := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher",
		"id": "RED-1"}}, "order": map[string]any{"amount": 1000}})["redemptions"].([]any)[0].(map[string]any)["id"].(string)

	for _, r := range resources {
		if resp := a.E.Do(t, "POST", schemasURL(a), a.E.MgmtHeader(), map[string]any{"related_object": r,
			"properties": level}); resp.Status != 200 {
			t.Fatalf("%s schema: %d %s", r, resp.Status, resp.Body)
		}
	}
	stacktest.Eventually(t, 5e9, "the schemas served", func() bool {
		return stacktest.Num(a.OK("GET", "/v1/metadata-schemas", nil)["total"]) == int64(len(resources))
	})

	md := map[string]any{"level": "high"}
	for _, c := range []struct {
		resource, method, path string
		body                   any
		detail                 string // "" : "level: must be a number"
	}{
		{"campaign", "POST", "/v1/campaigns", map[string]any{"name": "Coupons", "campaign_type": "DISCOUNT_COUPONS",
			"voucher":  map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 5}},
			"metadata": md}, ""},
		{"campaign (loyalty)", "POST", "/v1/loyalties", map[string]any{"name": "More points", "metadata": md,
			"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}}, ""},
		{"campaign update", "PUT", "/v1/campaigns/" + promoID, map[string]any{"metadata": md}, ""},
		{"customer", "POST", "/v1/customers", map[string]any{"source_id": "cat", "metadata": md}, ""},
		{"customer update", "PUT", "/v1/customers/ann", map[string]any{"metadata": md}, ""},
		{"earning_rule", "POST", "/v1/loyalties/" + loyaltyID + "/earning-rules", []map[string]any{{"event": "order.paid",
			"loyalty": map[string]any{"type": "FIXED", "points": 1}, "metadata": md}}, ""},
		{"loyalty_tier", "POST", "/v1/loyalties/" + loyaltyID + "/tiers", []map[string]any{{"name": "Gold",
			"points": map[string]any{"from": 0, "to": 100}, "metadata": md}}, ""},
		{"order", "POST", "/v1/orders", map[string]any{"amount": 100, "metadata": md}, ""},
		{"order update", "PUT", "/v1/orders/" + order, map[string]any{"metadata": md}, ""},
		{"order_item", "POST", "/v1/orders", map[string]any{"items": []any{map[string]any{"quantity": 1, "price": 100},
			map[string]any{"quantity": 1, "price": 100, "metadata": md}}}, "items[1]: level: must be a number"},
		{"product", "POST", "/v1/products", map[string]any{"name": "Cup", "metadata": md}, ""},
		{"product update", "PUT", "/v1/products/" + productID, map[string]any{"metadata": md}, ""},
		{"sku", "POST", "/v1/products/" + productID + "/skus", map[string]any{"sku": "Blue", "metadata": md}, ""},
		{"promotion_tier", "POST", "/v1/promotions/" + promoID + "/tiers", map[string]any{"name": "More",
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 200}}, "metadata": md}, ""},
		{"publication", "POST", "/v1/publications", map[string]any{"voucher": "PUB-1",
			"customer": map[string]any{"source_id": "ann"}, "metadata": md}, ""},
		{"redemption", "POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher",
			"id": "PUB-1"}}, "metadata": md}, ""},
		{"redemption (reward)", "POST", "/v1/loyalties/members/" + card + "/redemption", map[string]any{
			"reward": map[string]any{"id": reward}, "metadata": md}, ""},
		{"redemption (rollback)", "POST", "/v1/redemptions/" + red + "/rollback", map[string]any{"metadata": md}, ""},
		{"reward", "POST", "/v1/rewards", map[string]any{"name": "Mug", "metadata": md,
			"parameters": map[string]any{"product": map[string]any{"id": productID}}}, ""},
		{"reward update", "PUT", "/v1/rewards/" + reward, map[string]any{"metadata": md}, ""},
		{"voucher", "POST", "/v1/vouchers/NEW-1", map[string]any{"type": "DISCOUNT_VOUCHER", "metadata": md,
			"discount": map[string]any{"type": "PERCENT", "percent_off": 5}}, ""},
		{"voucher update", "PUT", "/v1/vouchers/PUB-1", map[string]any{"metadata": md}, ""},
		{"voucher (a loyalty card)", "POST", "/v1/loyalties/" + loyaltyID + "/members", map[string]any{
			"customer": map[string]any{"source_id": "dan"}, "metadata": md}, ""},
	} {
		want := c.detail
		if want == "" {
			want = "level: must be a number"
		}
		r := a.Do(c.method, c.path, c.body)
		m := r.JSON(t)
		if r.Status != 400 || m["key"] != "metadata_validation_failed" || m["details"] != want {
			t.Errorf("%s: %s %s: %d %s, want 400 metadata_validation_failed %q", c.resource, c.method, c.path, r.Status,
				strings.TrimSpace(string(r.Body)), want)
		}
	}
}
