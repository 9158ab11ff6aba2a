package e2e_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The engine's client twins: qualifications and validations answer as
// the server's do; a redemption needs client_redeem_enabled.
func TestClientValidationQualificationAndRedemption(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.OK("POST", "/v1/vouchers/CLIENT-10", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 10}})
	body := map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "CLIENT-10"}},
		"order": map[string]any{"amount": 5000}, "customer": map[string]any{"source_id": "web-1"}}
	v := client(a, shop, "POST", "/client/v1/validations", body)
	if v.Status != 200 || v.JSON(t)["valid"] != true {
		t.Fatalf("client validation: %d %s", v.Status, v.Body)
	}
	if q := client(a, shop, "POST", "/client/v1/qualifications", map[string]any{"order": map[string]any{"amount": 5000},
		"customer": map[string]any{"source_id": "web-1"}}); q.Status != 200 || q.JSON(t)["redeemables"] == nil {
		t.Fatalf("client qualifications: %d %s", q.Status, q.Body)
	}
	// Scenarios, filters and their refusals pass through as the server's.
	if q := client(a, shop, "POST", "/client/v1/qualifications", map[string]any{"scenario": "AUDIENCE_ONLY",
		"customer": map[string]any{"source_id": "web-1"}, "options": map[string]any{"filters": map[string]any{
			"resource_type": map[string]any{"conditions": map[string]any{"$is": []any{"promotion_tier"}}}}}}); q.Status != 200 {
		t.Fatalf("client qualifications with a scenario and filters: %d %s", q.Status, q.Body)
	}
	for _, bad := range []map[string]any{{"scenario": "PRODUCTS"},
		{"options": map[string]any{"filters": map[string]any{"colour": map[string]any{"conditions": map[string]any{"$is": []any{"red"}}}}}}} {
		if q := client(a, shop, "POST", "/client/v1/qualifications", bad); q.Status != 400 || q.JSON(t)["key"] != "invalid_payload" {
			t.Fatalf("client qualifications %v: %d %s", bad, q.Status, q.Body)
		}
	}
	r := client(a, shop, "POST", "/client/v1/redemptions", body)
	if r.Status != 403 || r.JSON(t)["key"] != "client_side_action_disabled" {
		t.Fatalf("client redemption while disabled: %d %s", r.Status, r.Body)
	}
	if v := client(a, "https://elsewhere.example", "POST", "/client/v1/validations", body); v.Status != 403 {
		t.Fatalf("another origin: %d %s", v.Status, v.Body)
	}
	settings(a, map[string]any{"client_redeem_enabled": true})
	// The setting reaches the region within a poll.
	stacktest.Eventually(t, 5*time.Second, "client_redeem_enabled in force", func() bool {
		r = client(a, shop, "POST", "/client/v1/redemptions", body)
		return r.Status == 200
	})
	if len(r.JSON(t)["redemptions"].([]any)) != 1 {
		t.Fatalf("client redemption once enabled: %d %s", r.Status, r.Body)
	}
}

// A loyalty card pays with points from the client side only for its
// holder, through a token bound to the holder: a client key (whatever
// customer it names) is refused, a token bound to another customer finds
// the card inapplicable, the holder's token is served; client-side
// qualifications list cards only for a bound token.
func TestClientCardsPayOnlyForTheirHolder(t *testing.T) {
	t.Parallel()
	a := start(t)
	campID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	a.Member(campID, "bob")
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": coin})
	body := func(customer any) map[string]any {
		b := map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": coin}}},
			"order": map[string]any{"amount": 5000}}
		if customer != nil {
			b["customer"] = customer
		}
		return b
	}
	for _, c := range []any{nil, map[string]any{"source_id": "ann"}} {
		if v := client(a, shop, "POST", "/client/v1/validations", body(c)); v.Status != 403 || v.JSON(t)["key"] != "customer_token_required" {
			t.Fatalf("a client key naming %v: %d %s", c, v.Status, v.Body)
		}
	}
	qual := map[string]any{"customer": map[string]any{"source_id": "ann"}, "order": map[string]any{"amount": 5000}, "scenario": "CUSTOMER_WALLET"}
	if q := client(a, shop, "POST", "/client/v1/qualifications", qual); q.Status != 200 ||
		len(q.JSON(t)["redeemables"].(map[string]any)["data"].([]any)) != 0 {
		t.Fatalf("a client key's qualifications list ann's card: %d %s", q.Status, q.Body)
	}
	scope := "client_validations client_qualifications"
	bound := func(who string) func(path string, body any) stacktest.Resp {
		status, m := token(a, url.Values{"scope": {scope}, "customer": {who}, "origin": {shop}})
		if status != 200 {
			t.Fatalf("token for %s: %d %v", who, status, m)
		}
		return func(path string, body any) stacktest.Resp {
			h := http.Header{"Authorization": {"Bearer " + m["access_token"].(string)}, "Origin": {shop}}
			return a.E.Do(t, "POST", stacktest.URL("api", path), h, body)
		}
	}
	bob, ann := bound("bob"), bound("ann")
	v := bob("/client/v1/validations", body(nil))
	if in := v.JSON(t)["inapplicable_redeemables"].([]any); v.Status != 200 || len(in) != 1 ||
		in[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any)["key"] != "customer_not_holder" {
		t.Fatalf("bob's token: %d %s", v.Status, v.Body)
	}
	if v := ann("/client/v1/validations", body(nil)); v.Status != 200 || v.JSON(t)["valid"] != true {
		t.Fatalf("ann's token: %d %s", v.Status, v.Body)
	}
	q := ann("/client/v1/qualifications", map[string]any{"order": map[string]any{"amount": 5000}, "scenario": "CUSTOMER_WALLET"})
	if d := q.JSON(t)["redeemables"].(map[string]any)["data"].([]any); q.Status != 200 || len(d) != 1 || d[0].(map[string]any)["id"] != code {
		t.Fatalf("ann's token's qualifications: %d %s", q.Status, q.Body)
	}
	// Server-side, a customer other than the holder is refused too.
	v2 := a.OK("POST", "/v1/validations", body(map[string]any{"source_id": "bob"}))
	if in := v2["inapplicable_redeemables"].([]any); len(in) != 1 ||
		in[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any)["key"] != "customer_not_holder" {
		t.Fatalf("server-side for bob: %v", v2)
	}
}
