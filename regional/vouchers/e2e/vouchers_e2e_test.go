package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// norm is v as a decoded JSON answer holds it.
func norm(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var variants = map[string]map[string]any{
	"amount":  {"type": "AMOUNT", "amount_off": 1050, "effect": "APPLY_TO_ORDER"},
	"percent": {"type": "PERCENT", "percent_off": 12.5, "amount_limit": 3000, "effect": "APPLY_TO_ITEMS"},
	"unit": {"type": "UNIT", "unit_off": 2, "unit_type": "prod_0a1b2c", "effect": "ADD_MISSING_ITEMS",
		"product": map[string]any{"id": "prod_0a1b2c", "source_id": "socks", "name": "Socks"}},
	"unit_many": {"type": "UNIT", "effect": "ADD_MANY_ITEMS", "units": []any{
		map[string]any{"unit_off": 1, "unit_type": "prod_a", "effect": "ADD_NEW_ITEMS"},
		map[string]any{"unit_off": 3, "unit_type": "sku_b", "effect": "ADD_MISSING_ITEMS", "sku": map[string]any{"id": "sku_b", "source_id": "b"}}}},
	"fixed": {"type": "FIXED", "fixed_amount": 9900, "effect": "APPLY_TO_ITEMS"},
}

func TestDiscountVariantsAreStoredAndReturnedExactly(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for name, d := range variants {
		code := "V-" + strings.ToUpper(name)
		body := map[string]any{"type": "DISCOUNT_VOUCHER", "discount": d, "category": "summer",
			"metadata": map[string]any{"k": "v"}, "additional_info": "info", "redemption": map[string]any{"quantity": 3},
			"start_date": "2030-01-01T00:00:00Z", "expiration_date": "2030-12-31T23:59:59Z",
			"validity_timeframe": map[string]any{"interval": "P1D", "duration": "PT1H"}, "validity_day_of_week": []int{1, 2, 3},
			"validity_hours": map[string]any{"daily": []any{map[string]any{"start_time": "10:00", "expiration_time": "12:00", "days_of_week": []int{1}}}}}
		created := a.OK("POST", "/v1/vouchers/"+code, body)
		for _, got := range []map[string]any{created, a.OK("GET", "/v1/vouchers/"+code, nil)} {
			if !reflect.DeepEqual(got["discount"], norm(t, d)) {
				t.Fatalf("%s: discount %v, want %v", name, got["discount"], d)
			}
			if got["code"] != code || got["type"] != "DISCOUNT_VOUCHER" || got["active"] != true || got["object"] != "voucher" ||
				!strings.HasPrefix(got["id"].(string), "v_") || got["category"] != "summer" || got["additional_info"] != "info" ||
				got["redemption"].(map[string]any)["quantity"] != 3.0 || got["start_date"] != "2030-01-01T00:00:00.000Z" ||
				!reflect.DeepEqual(got["validity_hours"], norm(t, body["validity_hours"])) ||
				!reflect.DeepEqual(got["validity_day_of_week"], norm(t, body["validity_day_of_week"])) ||
				got["metadata"].(map[string]any)["k"] != "v" {
				t.Fatalf("%s: %v", name, got)
			}
		}
	}
	g := a.OK("POST", "/v1/vouchers", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 10000, "effect": "APPLY_TO_ORDER"}})
	if gift := g["gift"].(map[string]any); gift["amount"] != 10000.0 || gift["balance"] != 10000.0 || g["discount"] != nil {
		t.Fatalf("gift: %v", g)
	}

	// Wrong types and values are 400 naming the property.
	for _, c := range []struct {
		body map[string]any
		name string
	}{
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": "10"}}, "discount.amount_off"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": -1}}, "discount.amount_off"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 101}}, "discount.percent_off"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10, "amount_limit": true}}, "discount.amount_limit"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1, "effect": "ADD_NEW_ITEMS"}}, "discount.effect"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "UNIT", "unit_off": 1.5, "unit_type": "p"}}, "discount.unit_off"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "UNIT", "unit_off": 1}}, "discount.unit_type"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "UNIT", "effect": "ADD_MANY_ITEMS", "units": []any{map[string]any{"unit_off": 1, "unit_type": "p", "effect": "ADD_SAME_ITEMS"}}}}, "discount.units[0].effect"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "FIXED"}}, "discount.fixed_amount"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "BOGUS"}}, "discount.type"},
		{map[string]any{"type": "DISCOUNT_VOUCHER"}, "discount"},
		{map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1.5}}, "gift.amount"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"], "validity_day_of_week": []int{7}}, "validity_day_of_week"},
		{map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"], "redemption": map[string]any{"quantity": 0}}, "redemption.quantity"},
		{map[string]any{"type": "COUPON"}, "type"},
	} {
		e := a.Fails("POST", "/v1/vouchers", c.body, 400, "invalid_payload")
		if !strings.Contains(e["details"].(string), c.name) {
			t.Fatalf("%v: %v does not name %s", c.body, e, c.name)
		}
	}
}

func TestCodesAreUniqueAcrossVouchersAndLoyaltyCards(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	camp := a.Campaign("Club", nil)
	card := a.Member(camp["id"].(string), "ann")["code"].(string)
	amount := map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]}
	a.Fails("POST", "/v1/vouchers/"+url.PathEscape(card), amount, 409, "duplicate_found")
	a.Fails("POST", "/v1/vouchers", map[string]any{"code": card, "type": "DISCOUNT_VOUCHER", "discount": variants["amount"]}, 409, "duplicate_found")
	a.OK("POST", "/v1/vouchers/TAKEN", amount)
	a.Fails("POST", "/v1/vouchers/TAKEN", amount, 409, "duplicate_found")

	// The reverse: a loyalty card never takes a voucher's code. This
	// program's code space is two codes, of which a voucher holds one.
	one := a.Campaign("Two codes", map[string]any{"vouchers_count": 0, "voucher": map[string]any{"type": "LOYALTY_CARD",
		"code_config": map[string]any{"pattern": "ONE-#", "charset": "AB"}}})
	a.OK("POST", "/v1/vouchers/ONE-A", amount)
	for i := 0; i < 3; i++ {
		if m := a.Member(one["id"].(string), "bob"); m["code"] != "ONE-B" {
			t.Fatalf("card: %v", m)
		}
	}
	a.Fails("POST", "/v1/vouchers/ONE-B", amount, 409, "duplicate_found")

	// Generated codes follow code_config.
	for i := 0; i < 20; i++ {
		v := a.OK("POST", "/v1/vouchers", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["fixed"],
			"code_config": map[string]any{"pattern": "SUMMER-####", "charset": "0123456789", "postfix": "-X"}})
		if !regexp.MustCompile(`^SUMMER-[0-9]{4}-X$`).MatchString(v["code"].(string)) {
			t.Fatalf("code: %v", v["code"])
		}
	}
}

func TestVoucherUpdateEnableDisableDeleteAndAnotherProject(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	a.OK("POST", "/v1/vouchers/MINE", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["percent"]})
	other.Fails("GET", "/v1/vouchers/MINE", nil, 404, "not_found")
	other.Fails("PUT", "/v1/vouchers/MINE", map[string]any{"active": false}, 404, "not_found")
	other.Fails("DELETE", "/v1/vouchers/MINE", nil, 404, "not_found")
	if l := other.OK("GET", "/v1/vouchers", nil); l["total"] != 0.0 {
		t.Fatalf("another project's list: %v", l)
	}
	// The same code in another project is free.
	other.OK("POST", "/v1/vouchers/MINE", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]})

	u := a.OK("PUT", "/v1/vouchers/MINE", map[string]any{"discount": variants["fixed"], "metadata": map[string]any{"n": 1}})
	if !reflect.DeepEqual(u["discount"], norm(t, variants["fixed"])) || u["updated_at"] == nil {
		t.Fatalf("update: %v", u)
	}
	a.Fails("PUT", "/v1/vouchers/MINE", map[string]any{"type": "GIFT_VOUCHER"}, 400, "invalid_payload")
	if d := a.OK("POST", "/v1/vouchers/MINE/disable", nil); d["active"] != false {
		t.Fatalf("disable: %v", d)
	}
	if g := a.OK("GET", "/v1/vouchers/MINE", nil); g["active"] != false {
		t.Fatalf("disabled: %v", g)
	}
	if e := a.OK("POST", "/v1/vouchers/MINE/enable", nil); e["active"] != true {
		t.Fatalf("enable: %v", e)
	}

	// To the bin: gone, its code still taken until the entry is removed.
	if r := a.Do("DELETE", "/v1/vouchers/MINE", nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/vouchers/MINE", nil, 404, "not_found")
	a.Fails("POST", "/v1/vouchers/MINE", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]}, 409, "duplicate_found")
	bin := a.OK("GET", "/v1/trash-bin", nil)
	entries := bin["data"].([]any)
	if len(entries) != 1 {
		t.Fatalf("bin: %v", bin)
	}
	if r := a.Do("DELETE", "/v1/trash-bin/"+entries[0].(map[string]any)["id"].(string), nil); r.Status >= 300 {
		t.Fatalf("bin remove: %d %s", r.Status, r.Body)
	}
	a.OK("POST", "/v1/vouchers/MINE", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]})
	// For good: the code is free at once.
	if r := a.Do("DELETE", "/v1/vouchers/MINE?force=true", nil); r.Status != 204 {
		t.Fatalf("force delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/vouchers/MINE", nil, 404, "not_found")
	a.OK("POST", "/v1/vouchers/MINE", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]})
}

func TestDiscountCampaignGeneratesItsVouchersAsynchronously(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Summer", "campaign_type": "DISCOUNT_COUPONS",
		"vouchers_count": 10000, "category": "summer",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["percent"], "redemption": map[string]any{"quantity": 1},
			"code_config": map[string]any{"pattern": "SUM-########", "charset": "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"}}})
	id := camp["id"].(string)
	if camp["campaign_type"] != "DISCOUNT_COUPONS" || camp["vouchers_count"] != 10000.0 || camp["async_action_id"] == nil ||
		!reflect.DeepEqual(camp["voucher"].(map[string]any)["discount"], norm(t, variants["percent"])) {
		t.Fatalf("campaign: %v", camp)
	}
	act := a.WaitAction(camp["async_action_id"].(string))
	if act["type"] != "CAMPAIGN.VOUCHERS_GENERATE" || act["progress"] != 100.0 {
		t.Fatalf("action: %v", act)
	}
	l := a.OK("GET", "/v1/vouchers?campaign_id="+id+"&limit=100", nil)
	if l["total"] != 10000.0 {
		t.Fatalf("vouchers: %v", l["total"])
	}
	seen := map[string]bool{}
	after := ""
	pages := 0
	for {
		p := "/v1/vouchers?campaign=Summer&limit=100&order=created_at"
		if after != "" {
			p += "&starting_after_id=" + after
		}
		l := a.OK("GET", p, nil)
		for _, v := range l["vouchers"].([]any) {
			m := v.(map[string]any)
			code := m["code"].(string)
			if seen[code] || !regexp.MustCompile(`^SUM-[A-HJ-NP-Z2-9]{8}$`).MatchString(code) || m["campaign_id"] != id ||
				m["campaign"] != "Summer" || m["category"] != "summer" ||
				!reflect.DeepEqual(m["discount"], norm(t, variants["percent"])) {
				t.Fatalf("voucher: %v", m)
			}
			seen[code] = true
		}
		pages++
		if l["has_more"] != true {
			break
		}
		after = l["more_starting_after"].(string)
		if pages > 5 { // the cursor works; the rest is counted by total
			break
		}
	}
	if len(seen) != 600 {
		t.Fatalf("paged %d vouchers", len(seen))
	}
	if g := a.OK("GET", "/v1/campaigns/"+id, nil); g["vouchers_generation_status"] != "DONE" || g["campaign_type"] != "DISCOUNT_COUPONS" {
		t.Fatalf("campaign: %v", g)
	}
	other.Fails("GET", "/v1/campaigns/"+id, nil, 404, "not_found")
	other.Fails("POST", "/v1/campaigns/"+id+"/vouchers", nil, 404, "not_found")
	if l := other.OK("GET", "/v1/vouchers?campaign_id="+id, nil); l["total"] != 0.0 {
		t.Fatalf("another project: %v", l)
	}

	// One more voucher, and one with a given code.
	one := a.OK("POST", "/v1/campaigns/"+id+"/vouchers", nil)
	given := a.OK("POST", "/v1/campaigns/"+id+"/vouchers/SUMMER-VIP", map[string]any{"metadata": map[string]any{"vip": true}})
	if one["campaign_id"] != id || given["code"] != "SUMMER-VIP" || given["metadata"].(map[string]any)["vip"] != true ||
		!reflect.DeepEqual(given["discount"], norm(t, variants["percent"])) {
		t.Fatalf("added: %v %v", one, given)
	}
	if g := a.OK("GET", "/v1/campaigns/Summer", nil); g["vouchers_count"] != 10002.0 {
		t.Fatalf("count: %v", g)
	}

	// Campaigns of every type are listed together.
	a.Campaign("Club", nil)
	gift := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Gifts", "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 1,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 5000}}})
	if gift["async_action_id"] != nil {
		t.Fatalf("one voucher is made at once: %v", gift)
	}
	gv := a.OK("GET", "/v1/vouchers?campaign_id="+gift["id"].(string), nil)["vouchers"].([]any)
	if len(gv) != 1 || gv[0].(map[string]any)["gift"].(map[string]any)["balance"] != 5000.0 {
		t.Fatalf("gift vouchers: %v", gv)
	}
	all := a.OK("GET", "/v1/campaigns?limit=2", nil)
	cs := all["campaigns"].([]any)
	if all["total"] != 3.0 || len(cs) != 2 || all["has_more"] != true || cs[0].(map[string]any)["name"] != "Summer" {
		t.Fatalf("campaigns: %v", all)
	}
	rest := a.OK("GET", "/v1/campaigns?limit=2&starting_after_id="+all["more_starting_after"].(string), nil)["campaigns"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["name"] != "Gifts" {
		t.Fatalf("page 2: %v", rest)
	}
	if l := a.OK("GET", "/v1/campaigns?campaign_type=DISCOUNT_COUPONS", nil); l["total"] != 1.0 {
		t.Fatalf("discount campaigns: %v", l)
	}
	a.Fails("POST", "/v1/campaigns", map[string]any{"name": "Summer", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"discount": variants["amount"]}}, 409, "duplicate_found")
	a.Fails("POST", "/v1/campaigns", map[string]any{"name": "Bad", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"discount": map[string]any{"type": "AMOUNT"}}}, 400, "invalid_payload")
	lp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Points", "campaign_type": "LOYALTY_PROGRAM"})
	if lp["campaign_type"] != "LOYALTY_PROGRAM" {
		t.Fatalf("loyalty through /v1/campaigns: %v", lp)
	}
}

func TestVoucherListFilters(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for i := 0; i < 5; i++ {
		cat := "a"
		if i%2 == 1 {
			cat = "b"
		}
		a.OK("POST", fmt.Sprintf("/v1/vouchers/L-%d", i), map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"], "category": cat})
	}
	if l := a.OK("GET", "/v1/vouchers?category=b", nil); l["total"] != 2.0 {
		t.Fatalf("category: %v", l)
	}
	if l := a.OK("GET", "/v1/vouchers?order=code&limit=2", nil); l["vouchers"].([]any)[0].(map[string]any)["code"] != "L-0" || l["has_more"] != true {
		t.Fatalf("order by code: %v", l)
	} else {
		next := a.OK("GET", "/v1/vouchers?order=code&limit=2&starting_after_id="+l["more_starting_after"].(string), nil)
		if next["vouchers"].([]any)[0].(map[string]any)["code"] != "L-2" {
			t.Fatalf("code cursor: %v", next)
		}
	}
	if l := a.OK("GET", "/v1/vouchers?created_at[after]=2000-01-01T00:00:00Z&created_at[before]=2999-01-01", nil); l["total"] != 5.0 {
		t.Fatalf("created_at: %v", l)
	}
	if l := a.OK("GET", "/v1/vouchers?created_at[before]=2000-01-01T00:00:00Z", nil); l["total"] != 0.0 {
		t.Fatalf("created_at before: %v", l)
	}
	if l := a.OK("GET", "/v1/vouchers?filters[code][conditions][$in][0]=L-1&filters[code][conditions][$in][1]=L-3", nil); l["total"] != 2.0 {
		t.Fatalf("filters: %v", l)
	}
	if l := a.OK("GET", "/v1/vouchers?customer=cust_none", nil); l["total"] != 0.0 {
		t.Fatalf("customer: %v", l)
	}
	a.Fails("GET", "/v1/vouchers?order=points", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/vouchers?created_at[after]=soon", nil, 400, "invalid_query_params")
}
