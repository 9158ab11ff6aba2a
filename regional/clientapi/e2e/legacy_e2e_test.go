package e2e_test

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The deprecated GET /client/v1/validate: the SDK's deep-object query
// validates one code as the stacked validation does, answered in the
// legacy shape; tracking_id names (or is given to) the customer.
func TestDeprecatedValidateAnswersAsTheStackedValidation(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.OK("POST", "/v1/vouchers/LEG-10", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 10}, "metadata": map[string]any{"shelf": "A"}})
	q := url.Values{"code": {"LEG-10"}, "tracking_id": {"web-1"}, "item[0][source_id]": {"sku-1"},
		"item[0][quantity]": {"2"}, "item[0][price]": {"1500"}, "item[1][source_id]": {"sku-2"}, "item[1][quantity]": {"1"},
		"item[1][price]": {"2000"}, "amount": {"5000"}, "metadata[page]": {"cart"}}
	v := object(t, client(a, shop, "GET", "/client/v1/validate?"+q.Encode(), nil), "legacy validation")
	server := a.OK("POST", "/v1/validations", map[string]any{
		"redeemables": []any{map[string]any{"object": "voucher", "id": "LEG-10"}},
		"order": map[string]any{"amount": 5000, "items": []any{
			map[string]any{"source_id": "sku-1", "quantity": 2, "price": 1500},
			map[string]any{"source_id": "sku-2", "quantity": 1, "price": 2000}}},
		"customer": map[string]any{"source_id": "web-1"}})
	twin := server["redeemables"].([]any)[0].(map[string]any)
	if v["valid"] != true || v["code"] != "LEG-10" || v["tracking_id"] != "web-1" {
		t.Fatalf("legacy validation: %v", v)
	}
	if !reflect.DeepEqual(v["discount"], twin["result"].(map[string]any)["discount"]) || !reflect.DeepEqual(v["order"], twin["order"]) {
		t.Fatalf("legacy validation %v differs from the server's %v", v, twin)
	}
	if o := v["order"].(map[string]any); o["total_discount_amount"] != float64(500) || o["total_amount"] != float64(4500) {
		t.Fatalf("legacy order: %v", o)
	}
	if v["metadata"].(map[string]any)["shelf"] != "A" {
		t.Fatalf("legacy voucher fields: %v", v)
	}

	// No customer: a tracking_id is made for the SDK to keep.
	v = object(t, client(a, shop, "GET", "/client/v1/validate?code=LEG-10&amount=1000", nil), "untracked validation")
	if id, _ := v["tracking_id"].(string); !strings.HasPrefix(id, "track_") || v["valid"] != true {
		t.Fatalf("untracked validation: %v", v)
	}

	// A code that does not apply is valid: false with the reason.
	a.OK("POST", "/v1/vouchers/LEG-10/disable", nil)
	v = object(t, client(a, shop, "GET", "/client/v1/validate?code=LEG-10&amount=1000&tracking_id=web-1", nil), "disabled")
	if e, _ := v["error"].(map[string]any); v["valid"] != false || e["key"] != "voucher_disabled" || v["reason"] == nil || v["discount"] != nil {
		t.Fatalf("a disabled code: %v", v)
	}

	refusesQueries(t, a, "/client/v1/validate?", "code=LEG-10", []badQuery{
		{"amount=1000", "missing_code"},
		{"code=LEG-10&tracking_id=web-1&customer[source_id]=web-2", "ambiguous_tracking_id"},
		{"code=LEG-10&customer[name]=Ann", "missing_customer"},
		{"code=LEG-10&item[0[quantity]=1", "invalid_query_params"},
		{"code=LEG-10&order=5", "invalid_query_params"},
		{"code=LEG-10&amount=lots", "invalid_payload"},
		{"code=LEG-10&amount=NaN", "invalid_payload"},
		{"code=LEG-10&item[0][price]=Infinity&item[0][quantity]=1", "invalid_payload"},
	})
}

// badQuery is a query a legacy GET refuses, with the key of its 400.
type badQuery struct{ query, key string }

// refusesQueries checks that the client GET path (ending in "?") answers
// each bad query with 400 and its key, and that it refuses the server's
// keys even with a good query.
func refusesQueries(t *testing.T, a stacktest.API, path, good string, bad []badQuery) {
	t.Helper()
	for _, c := range bad {
		r := client(a, shop, "GET", path+c.query, nil)
		if r.Status != 400 || r.JSON(t)["key"] != c.key {
			t.Errorf("%s: %d %s, want 400 %s", c.query, r.Status, r.Body, c.key)
		}
	}
	if r := a.Do("GET", path+good, nil); r.Status != 401 && r.Status != 403 {
		t.Fatalf("server keys on the client API: %d %s", r.Status, r.Body)
	}
}

// A LOCK session asked in the legacy query reserves the code as the
// stacked validation's does.
func TestDeprecatedValidateLocksASession(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.OK("POST", "/v1/vouchers/LEG-ONCE", map[string]any{"type": "DISCOUNT_VOUCHER", "redemption": map[string]any{"quantity": 1},
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}})
	v := object(t, client(a, shop, "GET", "/client/v1/validate?code=LEG-ONCE&amount=1000&tracking_id=web-1"+
		"&session_type=LOCK&session_key=sess-1&session_ttl=1&session_ttl_unit=HOURS", nil), "locking validation")
	if s, _ := v["session"].(map[string]any); v["valid"] != true || s["key"] != "sess-1" {
		t.Fatalf("locking validation: %v", v)
	}
	v = object(t, client(a, shop, "GET", "/client/v1/validate?code=LEG-ONCE&amount=1000&tracking_id=web-2", nil), "another customer")
	if v["valid"] != false {
		t.Fatalf("a code locked for another session: %v", v)
	}
}

// The deprecated POST /client/v1/redeem redeems one code behind
// client_redeem_enabled and answers the voucher's redemption, which the
// server reads back.
func TestDeprecatedRedeem(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.OK("POST", "/v1/vouchers/LEG-R1", map[string]any{"type": "DISCOUNT_VOUCHER", "redemption": map[string]any{"quantity": 1},
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 700}})
	body := map[string]any{"customer": map[string]any{"source_id": "web-3"}, "order": map[string]any{"amount": 5000},
		"metadata": map[string]any{"page": "checkout"}}
	if r := client(a, shop, "POST", "/client/v1/redeem?code=LEG-R1", body); r.Status != 403 || r.JSON(t)["key"] != "client_side_action_disabled" {
		t.Fatalf("redeem while disabled: %d %s", r.Status, r.Body)
	}
	settings(a, map[string]any{"client_redeem_enabled": true})
	var r stacktest.Resp
	stacktest.Eventually(t, 5*time.Second, "client_redeem_enabled in force", func() bool {
		r = client(a, shop, "POST", "/client/v1/redeem?code=LEG-R1", map[string]any{"order": map[string]any{"amount": 5000}})
		return r.Status != 403
	})
	if r.Status != 400 || r.JSON(t)["key"] != "missing_customer" {
		t.Fatalf("a redemption naming no customer: %d %s", r.Status, r.Body)
	}
	red := object(t, client(a, shop, "POST", "/client/v1/redeem?code=LEG-R1", body), "legacy redemption")
	voucher, _ := red["voucher"].(map[string]any)
	if red["object"] != "redemption" || red["result"] != "SUCCESS" || red["amount"] != float64(700) || voucher["code"] != "LEG-R1" ||
		red["metadata"].(map[string]any)["page"] != "checkout" {
		t.Fatalf("legacy redemption: %v", red)
	}
	back := a.OK("GET", "/v1/redemptions/"+red["id"].(string), nil)
	if back["id"] != red["id"] || back["result"] != "SUCCESS" || back["customer_id"] == nil {
		t.Fatalf("read back: %v", back)
	}
	again := client(a, shop, "POST", "/client/v1/redeem?code=LEG-R1", body)
	if again.Status != 400 || again.JSON(t)["key"] != "quantity_exceeded" {
		t.Fatalf("a second redemption of a code of quantity 1: %d %s", again.Status, again.Body)
	}
	if r := client(a, shop, "POST", "/client/v1/redeem", body); r.Status != 400 || r.JSON(t)["key"] != "missing_code" {
		t.Fatalf("no code: %d %s", r.Status, r.Body)
	}
}

// The client SDK's validate without a code calls GET
// /client/v1/promotions/validation: the project's promotion tiers that
// apply to the order and customer of the deep-object query, each with its
// discount and the amount it takes off, in hierarchy order; valid when one
// applies.
func TestDeprecatedPromotionsValidation(t *testing.T) {
	t.Parallel()
	a := start(t)
	big := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "big", "type": "advanced", "rules": map[string]any{
		"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{10000}}}, "logic": "1"}})["id"]
	gold := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "gold", "type": "advanced", "rules": map[string]any{
		"1":     map[string]any{"name": "customer.metadata", "property": "level", "conditions": map[string]any{"$is": []any{"gold"}}},
		"logic": "1"}})["id"]
	tier := func(name string, hierarchy, off int, rules ...any) map[string]any {
		t := map[string]any{"name": name, "banner": name + " banner", "hierarchy": hierarchy, "metadata": map[string]any{"tier": name},
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": off, "effect": "APPLY_TO_ORDER"}}}
		if len(rules) > 0 {
			t["validation_rules"] = rules
		}
		return t
	}
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{
		tier("Big", 1, 500, big), tier("Everyone", 2, 100), tier("Gold", 3, 300, gold)}}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"level": "gold"}})
	// A voucher is not a promotion: it never shows here.
	a.OK("POST", "/v1/vouchers/LEG-NOT-PROMO", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 50}})

	names := func(v map[string]any) []string {
		var out []string
		for _, p := range v["promotions"].([]any) {
			out = append(out, p.(map[string]any)["name"].(string))
		}
		return out
	}
	q := url.Values{"amount": {"20000"}, "item[0][source_id]": {"sku-1"}, "item[0][quantity]": {"2"}, "item[0][price]": {"10000"},
		"customer[source_id]": {"ann"}, "metadata[page]": {"cart"}}
	v := object(t, client(a, shop, "GET", "/client/v1/promotions/validation?"+q.Encode(), nil), "promotions validation")
	if v["valid"] != true || !reflect.DeepEqual(names(v), []string{"Big", "Everyone", "Gold"}) {
		t.Fatalf("a big order of a gold customer: %v", v)
	}
	p := v["promotions"].([]any)[0].(map[string]any)
	d, _ := p["discount"].(map[string]any)
	o, _ := p["order"].(map[string]any)
	if p["object"] != "promotion_tier" || p["valid"] != true || p["banner"] != "Big banner" || p["hierarchy"] != float64(1) ||
		d["amount_off"] != float64(500) || p["discount_amount"] != float64(500) || o["total_amount"] != float64(19500) ||
		p["metadata"].(map[string]any)["tier"] != "Big" || p["campaign"].(map[string]any)["name"] != "Promo" {
		t.Fatalf("the Big tier: %v", p)
	}
	if !strings.HasPrefix(p["id"].(string), "promo_") {
		t.Fatalf("a tier's id: %v", p["id"])
	}

	// A small order of a customer tracked by tracking_id: only the tier
	// without rules.
	v = object(t, client(a, shop, "GET", "/client/v1/promotions/validation?amount=1000&tracking_id=web-9", nil), "small order")
	if v["valid"] != true || v["tracking_id"] != "web-9" || !reflect.DeepEqual(names(v), []string{"Everyone"}) {
		t.Fatalf("a small order: %v", v)
	}
	// No tier applies: valid false, no promotions; no customer: a
	// tracking_id is made.
	a.OK("POST", "/v1/promotions/tiers/"+v["promotions"].([]any)[0].(map[string]any)["id"].(string)+"/disable", nil)
	// (Qualifications read the tiers at most qualifications.CatalogueTTL old.)
	stacktest.Eventually(t, 5*time.Second, "the disabled tier gone", func() bool {
		v = object(t, client(a, shop, "GET", "/client/v1/promotions/validation?amount=1000", nil), "nothing applies")
		return v["valid"] == false
	})
	if id, _ := v["tracking_id"].(string); len(v["promotions"].([]any)) != 0 || !strings.HasPrefix(id, "track_") {
		t.Fatalf("nothing applies: %v", v)
	}
	refusesQueries(t, a, "/client/v1/promotions/validation?", "amount=1000", []badQuery{
		{"amount=lots", "invalid_payload"},
		{"item[0[quantity]=1", "invalid_query_params"},
		{"tracking_id=web-1&customer[source_id]=web-2", "ambiguous_tracking_id"},
	})
}
