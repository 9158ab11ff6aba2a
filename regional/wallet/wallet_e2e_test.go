package wallet_test

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// holdings is a wallet page's rows by redeemable code, and the page.
func holdings(a stacktest.API, customer, query string) (map[string]map[string]any, []string, map[string]any) {
	a.T.Helper()
	l := a.OK("GET", "/v1/customers/"+customer+"/redeemables?"+query, nil)
	byCode, ids := map[string]map[string]any{}, []string{}
	for _, d := range l["data"].([]any) {
		h := d.(map[string]any)
		code := h["redeemable"].(map[string]any)["voucher"].(map[string]any)["code"].(string)
		byCode[code] = h
		ids = append(ids, h["id"].(string))
	}
	return byCode, ids, l
}

// TestWalletListsEveryKindHeldWithItsStatus: a customer holding a
// discount voucher in each state, gift cards with and without credits,
// loyalty cards with and without points, a referral code as its referrer
// and another as a referee sees each once, with its role, types and
// status; the filters select by those fields and the cursor pages through
// them in id order either way.
func TestWalletListsEveryKindHeldWithItsStatus(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	now := a.E.Clock.Now().UTC()
	ann := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "name": "Ann"})["id"].(string)
	publish := func(body map[string]any) map[string]any {
		body["customer"] = map[string]any{"source_id": "ann"}
		return a.OK("POST", "/v1/publications", body)["voucher"].(map[string]any)
	}
	day := func(d int) string { return now.Add(time.Duration(d) * 24 * time.Hour).Format(time.RFC3339) }
	for code, body := range map[string]map[string]any{
		"FRESH":   {},
		"ONCE":    {"redemption": map[string]any{"quantity": 1}},
		"OFF":     {},
		"LATER":   {"start_date": day(30)},
		"EXPIRES": {"expiration_date": day(1)},
	} {
		body["discount"] = map[string]any{"type": "AMOUNT", "amount_off": 100}
		a.Voucher(code, body)
		publish(map[string]any{"voucher": code})
	}
	a.OK("POST", "/v1/vouchers/OFF/disable", nil)
	a.OK("POST", "/v1/redemptions", map[string]any{"customer": map[string]any{"id": ann},
		"redeemables": []any{map[string]any{"object": "voucher", "id": "ONCE"}}, "order": stacktest.Order([2]int{1000, 1})})
	// A voucher of a campaign that is disabled is DISABLED, whatever its own flag.
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Paused", "campaign_type": "DISCOUNT_COUPONS", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "code_config": map[string]any{"pattern": "PAUSED-#####"}}})
	paused := publish(map[string]any{"campaign": "Paused"})["code"].(string)
	a.OK("POST", "/v1/campaigns/Paused/disable", nil)
	for code, amount := range map[string]int{"GIFT": 500, "EMPTY": 0} {
		a.Voucher(code, map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": amount}})
		publish(map[string]any{"voucher": code})
	}
	points := a.Campaign("Points", map[string]any{"type": "AUTO_UPDATE"})["id"].(string)
	none := a.Campaign("None", map[string]any{"type": "AUTO_UPDATE"})["id"].(string)
	rich, poor := a.Member(points, "ann")["code"].(string), a.Member(none, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/"+points+"/members/"+rich+"/balance", map[string]any{"points": 100})
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Friends", "campaign_type": "REFERRAL_PROGRAM", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 1000}, "code_config": map[string]any{"pattern": "REF-#####"}},
		"referral_program": map[string]any{"conversion_event_type": "redemption"}})
	mine := publish(map[string]any{"campaign": "Friends"})["code"].(string)
	bobs := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Friends",
		"customer": map[string]any{"source_id": "bob"}})["voucher"].(map[string]any)["code"].(string)
	a.OK("POST", "/v1/referrals/members/"+bobs+"/holders", map[string]any{"holders": []any{map[string]any{"id": ann}}})
	// EXPIRES expires; LATER is still a month away.
	a.E.Clock.Advance(2 * 24 * time.Hour)

	want := map[string][4]string{ // role, campaign type, voucher type, status
		"FRESH": {"OWNER", "", "DISCOUNT_VOUCHER", "ACTIVE"}, "ONCE": {"OWNER", "", "DISCOUNT_VOUCHER", "USED"},
		"OFF": {"OWNER", "", "DISCOUNT_VOUCHER", "DISABLED"}, "LATER": {"OWNER", "", "DISCOUNT_VOUCHER", "NOT_ACTIVE_YET"},
		"EXPIRES": {"OWNER", "", "DISCOUNT_VOUCHER", "EXPIRED"}, "GIFT": {"OWNER", "", "GIFT_VOUCHER", "ACTIVE"},
		"EMPTY": {"OWNER", "", "GIFT_VOUCHER", "NO_BALANCE"},
		paused:  {"OWNER", "DISCOUNT_COUPONS", "DISCOUNT_VOUCHER", "DISABLED"},
		rich:    {"OWNER", "LOYALTY_PROGRAM", "LOYALTY_CARD", "ACTIVE"}, poor: {"OWNER", "LOYALTY_PROGRAM", "LOYALTY_CARD", "NO_BALANCE"},
		mine: {"REFERRER", "REFERRAL_PROGRAM", "DISCOUNT_VOUCHER", "ACTIVE"}, bobs: {"REFEREE", "REFERRAL_PROGRAM", "DISCOUNT_VOUCHER", "ACTIVE"},
	}
	got, all, l := holdings(a, "ann", "limit=100")
	if len(got) != len(want) || stacktest.Num(l["total"]) != int64(len(want)) || l["has_more"] != false || !slices.IsSorted(all) {
		t.Fatalf("wallet: %d holdings (total %v, has_more %v, sorted %v), want %d", len(got), l["total"], l["has_more"],
			slices.IsSorted(all), len(want))
	}
	for code, w := range want {
		h := got[code]
		ct, _ := h["campaign_type"].(string)
		r := h["redeemable"].(map[string]any)
		if h["holder_role"] != w[0] || ct != w[1] || h["voucher_type"] != w[2] || r["status"] != w[3] ||
			h["customer_id"] != ann || h["redeemable_object"] != "voucher" || r["type"] != "voucher" ||
			r["voucher"].(map[string]any)["id"] != h["redeemable_id"] || len(h["id"].(string)) != 25 {
			t.Errorf("%s: %v, want %v", code, h, w)
		}
	}
	// By source_id too, and a customer who holds nothing or is unknown.
	if bySource, _, _ := holdings(a, ann, "limit=100"); len(bySource) != len(want) {
		t.Errorf("by id: %d holdings", len(bySource))
	}
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "cy"})
	if empty, _, l := holdings(a, "cy", ""); len(empty) != 0 || stacktest.Num(l["total"]) != 0 {
		t.Errorf("cy: %v", l)
	}
	a.Fails("GET", "/v1/customers/nobody/redeemables", nil, 404, "not_found")

	f := func(field, op, v string) string {
		return url.QueryEscape("filters["+field+"][conditions]["+op+"]") + "=" + url.QueryEscape(v) + "&limit=100"
	}
	for _, c := range []struct {
		query string
		codes []string
	}{
		{f("holder_role", "$is", "REFERRER"), []string{mine}},
		{f("holder_role", "$in", "REFEREE"), []string{bobs}},
		{f("campaign_type", "$is", "LOYALTY_PROGRAM"), []string{rich, poor}},
		{f("voucher_type", "$is", "GIFT_VOUCHER"), []string{"GIFT", "EMPTY"}},
		{f("redeemable_id", "$is", got["FRESH"]["redeemable_id"].(string)), []string{"FRESH"}},
		{f("id", "$is", got[mine]["id"].(string)), []string{mine}},
		{f("campaign_id", "$is", points), []string{rich}},
		{f("redeemable_object", "$is", "voucher") + "&" + f("voucher_type", "$is", "LOYALTY_CARD"), []string{rich, poor}},
		{f("created_at", "$before", now.Add(-time.Hour).Format(time.RFC3339)), nil},
		{"filters[junction]=or&" + f("holder_role", "$is", "REFEREE") + "&" + f("voucher_type", "$is", "LOYALTY_CARD"),
			[]string{bobs, rich, poor}},
	} {
		sel, _, l := holdings(a, "ann", c.query)
		var codes []string
		for code := range sel {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		slices.Sort(c.codes)
		if !slices.Equal(codes, c.codes) || stacktest.Num(l["total"]) != int64(len(c.codes)) {
			t.Errorf("%s: %v (total %v), want %v", c.query, codes, l["total"], c.codes)
		}
	}
	a.Fails("GET", "/v1/customers/ann/redeemables?"+f("code", "$is", "FRESH"), nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/customers/ann/redeemables?order=created_at", nil, 400, "invalid_query_params")

	// Pages of 3 through the cursor, either way, are the whole list.
	for _, order := range []string{"id", "-id"} {
		var walked []string
		after := ""
		for range 10 {
			_, ids, l := holdings(a, "ann", "limit=3&order="+order+"&starting_after_id="+after)
			walked = append(walked, ids...)
			if l["has_more"] != true {
				if l["more_starting_after"] != nil {
					t.Errorf("last page's more_starting_after: %v", l["more_starting_after"])
				}
				break
			}
			after = l["more_starting_after"].(string)
			if after != ids[len(ids)-1] || len(ids) != 3 {
				t.Fatalf("page after %s: %v, next %s", after, ids, l["more_starting_after"])
			}
		}
		wantOrder := slices.Clone(all)
		if order == "-id" {
			slices.Reverse(wantOrder)
		}
		if !slices.Equal(walked, wantOrder) {
			t.Errorf("order %s by 3: %v, want %v", order, walked, wantOrder)
		}
	}
}
