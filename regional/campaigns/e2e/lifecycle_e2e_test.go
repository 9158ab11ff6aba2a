package e2e_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func discountCampaign(a stacktest.API, name string, n int) map[string]any {
	a.T.Helper()
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": n,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10}}})
	if id, ok := c["async_action_id"].(string); ok {
		a.WaitAction(id)
	}
	return c
}

func giftCampaign(a stacktest.API, name string, amount int) map[string]any {
	a.T.Helper()
	return a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 1,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": amount}}})
}

func codes(a stacktest.API, campaignID string) []string {
	a.T.Helper()
	var out []string
	for _, v := range a.OK("GET", "/v1/vouchers?limit=100&campaign_id="+campaignID, nil)["vouchers"].([]any) {
		out = append(out, v.(map[string]any)["code"].(string))
	}
	return out
}

// A campaign of any type is updated through PUT /v1/campaigns/{id}: the
// common properties and its type's own (a discount campaign's discount),
// which read back; a property of another type is refused.
func TestCampaignsOfEveryTypeAreUpdated(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	hooks := a.Subscribe("campaign.updated", "campaign.enabled", "campaign.disabled", "campaign.deleted")
	d := discountCampaign(a, "Spring", 1)
	id := d["id"].(string)
	u := a.OK("PUT", "/v1/campaigns/"+id, map[string]any{"description": "ten off", "metadata": map[string]any{"tier": "gold"},
		"start_date": "2026-01-01T00:00:00Z", "expiration_date": "2027-01-01T00:00:00Z",
		"validity_day_of_week": []int{1, 2}, "discount": map[string]any{"type": "AMOUNT", "amount_off": 500}})
	for _, r := range []map[string]any{u, a.OK("GET", "/v1/campaigns/Spring", nil)} {
		v := r["voucher"].(map[string]any)["discount"].(map[string]any)
		if r["description"] != "ten off" || r["metadata"].(map[string]any)["tier"] != "gold" || v["type"] != "AMOUNT" ||
			v["amount_off"] != 500.0 || r["start_date"] != "2026-01-01T00:00:00.000Z" || r["updated_at"] == nil ||
			len(r["validity_day_of_week"].([]any)) != 2 {
			t.Fatalf("updated campaign: %v", r)
		}
	}
	hooks.Wait(t, "campaign.updated", 1)
	// Vouchers made from now on take the new discount.
	nv := a.OK("POST", "/v1/campaigns/"+id+"/vouchers", nil)
	if nv["discount"].(map[string]any)["type"] != "AMOUNT" {
		t.Fatalf("new voucher: %v", nv)
	}
	g := giftCampaign(a, "Gifts", 1000)
	a.Fails("PUT", "/v1/campaigns/"+g["id"].(string), map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 5}},
		400, "invalid_payload")
	a.Fails("PUT", "/v1/campaigns/"+id, map[string]any{"discount": map[string]any{"type": "PERCENT"}}, 400, "invalid_payload")
	a.Fails("PUT", "/v1/campaigns/"+id, map[string]any{"type": "SOMETIMES"}, 400, "invalid_payload")
	a.Fails("PUT", "/v1/campaigns/"+id, map[string]any{"start_date": "2027-02-01T00:00:00Z"}, 400, "invalid_payload")
	a.Fails("PUT", "/v1/campaigns/"+id, map[string]any{"validity_day_of_week": []int{9}}, 400, "invalid_payload")
	a.Fails("PUT", "/v1/campaigns/"+id, []int{1}, 400, "invalid_payload")
	// Nothing of the refused updates was stored.
	if r := a.OK("GET", "/v1/campaigns/"+id, nil); r["start_date"] != "2026-01-01T00:00:00.000Z" || r["type"] != "AUTO_UPDATE" {
		t.Fatalf("after refused updates: %v", r)
	}
	// A loyalty program, through the same endpoint.
	l := a.Campaign("Program", nil)
	if r := a.OK("PUT", "/v1/campaigns/"+l["id"].(string), map[string]any{"description": "points"}); r["description"] != "points" ||
		r["campaign_type"] != "LOYALTY_PROGRAM" {
		t.Fatalf("loyalty update: %v", r)
	}
	// Enable and disable, any type.
	for _, c := range []string{id, l["id"].(string)} {
		if r := a.OK("POST", "/v1/campaigns/"+c+"/disable", nil); r["active"] != false {
			t.Fatalf("disabled: %v", r)
		}
		if r := a.OK("GET", "/v1/campaigns/"+c, nil); r["active"] != false {
			t.Fatalf("disabled, read: %v", r)
		}
		if r := a.OK("POST", "/v1/campaigns/"+c+"/enable", nil); r["active"] != true {
			t.Fatalf("enabled: %v", r)
		}
	}
	hooks.Wait(t, "campaign.disabled", 2)
	hooks.Wait(t, "campaign.enabled", 2)
	for _, p := range []string{"PUT /v1/campaigns/" + id, "POST /v1/campaigns/" + id + "/enable", "DELETE /v1/campaigns/" + id,
		"GET /v1/campaigns/" + id + "/summary"} {
		m, path, _ := cut(p)
		other.Fails(m, path, map[string]any{}, 404, "not_found")
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Deleting with force removes the campaign at once and its vouchers in an
// async action, freeing their codes; without force the campaign waits in
// the bin, and removing its entry deletes the vouchers.
func TestCampaignDeletionForGoodOrToTheBin(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("campaign.deleted")
	for _, force := range []bool{true, false} {
		name := map[bool]string{true: "Forced", false: "Binned"}[force]
		c := discountCampaign(a, name, 50)
		id := c["id"].(string)
		cs := codes(a, id)
		if len(cs) != 50 {
			t.Fatalf("codes: %d", len(cs))
		}
		q := ""
		if force {
			q = "?force=true"
		}
		r := a.Do("DELETE", "/v1/campaigns/"+id+q, nil)
		if r.Status != 202 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		act, _ := r.JSON(t)["async_action_id"].(string)
		a.Fails("GET", "/v1/campaigns/"+id, nil, 404, "not_found")
		a.Fails("GET", "/v1/vouchers/"+cs[0], nil, 404, "not_found")
		for _, l := range a.OK("GET", "/v1/campaigns?campaign_type=DISCOUNT_COUPONS", nil)["campaigns"].([]any) {
			if l.(map[string]any)["id"] == id {
				t.Fatalf("listed after deletion: %v", l)
			}
		}
		// The name is free at once.
		again := discountCampaign(a, name, 1)
		if !force {
			if act != "" {
				t.Fatalf("to the bin, yet an action: %s", r.Body)
			}
			var entry string
			for _, e := range a.OK("GET", "/v1/trash-bin", nil)["data"].([]any) {
				if m := e.(map[string]any); m["resource_type"] == "campaign" && m["resource_id"] == id {
					entry = m["id"].(string)
					if m["resource_name"] != name {
						t.Fatalf("bin entry: %v", m)
					}
				}
			}
			if entry == "" {
				t.Fatal("the campaign is not in the bin")
			}
			// Its codes stay taken while it is in the bin.
			a.Fails("POST", "/v1/vouchers/"+cs[1], map[string]any{"type": "DISCOUNT_VOUCHER",
				"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}, 409, "duplicate_found")
			if r := a.Do("DELETE", "/v1/trash-bin/"+entry, nil); r.Status >= 300 {
				t.Fatalf("bin remove: %d %s", r.Status, r.Body)
			}
			stacktest.Eventually(t, 30*time.Second, "binned campaign's vouchers deleted", func() bool {
				r := a.Do("POST", "/v1/vouchers/"+cs[1], map[string]any{"type": "DISCOUNT_VOUCHER",
					"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}})
				return r.Status == 200
			})
		} else {
			done := a.WaitAction(act)
			if done["type"] != "CAMPAIGN.VOUCHERS_DELETE" || done["result"].(map[string]any)["deleted_vouchers"] != 50.0 {
				t.Fatalf("action: %v", done)
			}
			// The codes are free again.
			a.OK("POST", "/v1/vouchers/"+cs[0], map[string]any{"type": "DISCOUNT_VOUCHER",
				"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}})
		}
		if codes := codes(a, again["id"].(string)); len(codes) != 1 {
			t.Fatalf("the new campaign of the same name: %v", codes)
		}
	}
	hooks.Wait(t, "campaign.deleted", 2)
	a.Fails("DELETE", "/v1/campaigns/nothing", nil, 404, "not_found")
	c := discountCampaign(a, "Bad force", 1)
	a.Fails("DELETE", "/v1/campaigns/"+c["id"].(string)+"?force=maybe", nil, 400, "invalid_query_params")
}

// The summary counts what happened to a campaign within the dates: its
// vouchers, publications and, for a gift campaign, its credits.
func TestCampaignSummary(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	g := giftCampaign(a, "Gift cards", 2500)
	id := g["id"].(string)
	code := codes(a, id)[0]
	a.OK("POST", "/v1/vouchers/"+code+"/balance", map[string]any{"amount": 1000})
	a.OK("POST", "/v1/vouchers/"+code+"/balance", map[string]any{"amount": -300})
	a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Gift cards"},
		"customer": map[string]any{"source_id": "ann"}})
	s := a.OK("GET", "/v1/campaigns/"+id+"/summary", nil)
	if s["object"] != "campaign_summary" || s["campaign"].(map[string]any)["id"] != id || s["vouchers_created"] != 1.0 ||
		s["publications"] != 1.0 || s["publications_succeeded"] != 1.0 || s["amount_added"] != 1000.0 ||
		s["amount_subtracted"] != 300.0 || s["created_vouchers_amount"] != 2500.0 || s["redemptions"] != 0.0 {
		t.Fatalf("gift summary: %v", s)
	}
	// A period that ended before the campaign began counts nothing.
	s = a.OK("GET", "/v1/campaigns/"+id+"/summary?start_date=2020-01-01&end_date=2020-12-31", nil)
	if s["vouchers_created"] != 0.0 || s["amount_added"] != 0.0 || s["publications"] != 0.0 {
		t.Fatalf("summary of 2020: %v", s)
	}
	l := a.Campaign("Points", nil)
	m := a.Member(l["id"].(string), "bob")
	a.OK("POST", "/v1/loyalties/"+l["id"].(string)+"/members/"+m["code"].(string)+"/balance", map[string]any{"points": 40})
	s = a.OK("GET", "/v1/campaigns/"+l["id"].(string)+"/summary", nil)
	if s["vouchers_created"] != 1.0 || s["points_added"] != 40.0 || s["campaign"].(map[string]any)["campaign_type"] != "LOYALTY_PROGRAM" {
		t.Fatalf("loyalty summary: %v", s)
	}
	d := discountCampaign(a, "Discounts", 3)
	if s := a.OK("GET", "/v1/campaigns/"+d["id"].(string)+"/summary", nil); s["vouchers_created"] != 3.0 || s["discounted_amount"] != 0.0 {
		t.Fatalf("discount summary: %v", s)
	}
	// Stacked redemptions of the campaigns' vouchers count: two of 10% off
	// 50.00, one refused (a disabled code), one rolled back; the gift card
	// pays 4.00 and is rolled back.
	dc := codes(a, d["id"].(string))
	redeem := func(code string, extra map[string]any) map[string]any {
		r := map[string]any{"object": "voucher", "id": code}
		for k, v := range extra {
			r[k] = v
		}
		return a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{r}, "order": map[string]any{"amount": 5000}})
	}
	first := redeem(dc[0], nil)
	redeem(dc[1], nil)
	a.OK("POST", "/v1/vouchers/"+dc[2]+"/disable", nil)
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": dc[2]}},
		"order": map[string]any{"amount": 5000}}, 400, "voucher_disabled")
	a.OK("POST", "/v1/redemptions/"+first["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	s = a.OK("GET", "/v1/campaigns/"+d["id"].(string)+"/summary", nil)
	if s["redemptions"] != 3.0 || s["redemptions_succeeded"] != 2.0 || s["redemptions_failed"] != 1.0 || s["rollbacks"] != 1.0 ||
		s["discounted_amount"] != 1000.0 || s["rolledback_discounted_amount"] != 500.0 {
		t.Fatalf("discount summary after redemptions: %v", s)
	}
	gift := redeem(code, map[string]any{"gift": map[string]any{"credits": 400}})
	a.OK("POST", "/v1/redemptions/"+gift["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	s = a.OK("GET", "/v1/campaigns/"+id+"/summary", nil)
	if s["redemptions"] != 1.0 || s["amount_redeemed"] != 400.0 || s["amount_rolledback"] != 400.0 || s["rollbacks"] != 1.0 {
		t.Fatalf("gift summary after a redemption: %v", s)
	}
	if s := a.OK("GET", "/v1/campaigns/"+d["id"].(string)+"/summary?start_date=2020-01-01&end_date=2020-12-31", nil); s["redemptions"] != 0.0 ||
		s["rollbacks"] != 0.0 || s["discounted_amount"] != 0.0 {
		t.Fatalf("redemptions in 2020: %v", s)
	}
	a.Fails("GET", "/v1/campaigns/"+id+"/summary?start_date=yesterday", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/campaigns/"+id+"/summary?start_date=2026-02-01&end_date=2026-01-01", nil, 400, "invalid_query_params")
}

// GET /v1/campaigns lists every type from one table, with the reference's
// filters: type, referral or not, generation status, name conditions, and
// the order by updated_at.
func TestCampaignListFilters(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Campaign("Loyal", nil)
	discountCampaign(a, "Alpha", 1)
	discountCampaign(a, "Beta", 1)
	giftCampaign(a, "Gamma", 100)
	a.OK("PUT", "/v1/campaigns/Alpha", map[string]any{"description": "touched"})
	names := func(q string) []string {
		var out []string
		for _, c := range a.OK("GET", "/v1/campaigns?"+q, nil)["campaigns"].([]any) {
			out = append(out, c.(map[string]any)["name"].(string))
		}
		return out
	}
	for q, want := range map[string]string{
		"":                               "Loyal Alpha Beta Gamma",
		"order=-created_at":              "Gamma Beta Alpha Loyal",
		"order=-updated_at&limit=1":      "Alpha",
		"campaign_type=GIFT_VOUCHERS":    "Gamma",
		"is_referral_code=true":          "",
		"is_referral_code=false&limit=2": "Loyal Alpha",
		"campaign_status=IN_PROGRESS":    "",
		"campaign_status=DONE&limit=1":   "Loyal",
		"filters[campaigns][conditions][$in][0]=Beta&filters[campaigns][conditions][$in][1]=Gamma": "Beta Gamma",
		url.Values{"filters[name][conditions][$is]": {"Alpha"}}.Encode():                           "Alpha",
	} {
		got := ""
		for i, n := range names(q) {
			if i > 0 {
				got += " "
			}
			got += n
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", q, got, want)
		}
	}
	a.Fails("GET", "/v1/campaigns?campaign_status=LIVE", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/campaigns?is_referral_code=yes", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/campaigns?order=name", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/campaigns?filters[nothing][conditions][$is]=x", nil, 400, "invalid_query_params")
}

// Creating a campaign of any type raises campaign.created, and the end of
// its vouchers' generation campaign.vouchers.generation.completed.
func TestCampaignCreationEvents(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("campaign.created", "campaign.vouchers.generation.completed")
	d := discountCampaign(a, "Made", 20)
	giftCampaign(a, "Given", 100)
	a.Campaign("Loyal", map[string]any{"vouchers_count": 5})
	hooks.Wait(t, "campaign.created", 3)
	done := hooks.Wait(t, "campaign.vouchers.generation.completed", 2)
	if done["vouchers_generation_status"] != "DONE" {
		t.Fatalf("generation completed: %v", done)
	}
	if r := a.OK("GET", "/v1/campaigns/"+d["id"].(string), nil); r["vouchers_generation_status"] != "DONE" {
		t.Fatalf("campaign: %v", r)
	}
}
