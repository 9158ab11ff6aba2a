package referrals_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// program is a referral program's setup: the custom event that converts,
// a loyalty program and a gift campaign that rewards come from, the
// referral campaign, and its code published to the referrer "ann".
type program struct {
	points, credits, campaign map[string]any
	code, ann                 string
}

// setup makes a program converting on "signed_up": the referee gets 100
// points; the referrer 500 credits for each referee (tier 1) and 1,000
// points for every second one (tier 2).
func setup(a stacktest.API) program {
	a.T.Helper()
	r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "signed_up", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 {
		a.T.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	var p program
	p.points = a.Campaign("Points", map[string]any{"type": "AUTO_UPDATE"})
	p.credits = a.OK("POST", "/v1/campaigns", map[string]any{"name": "Credits", "campaign_type": "GIFT_VOUCHERS", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0}}})
	body := map[string]any{"name": "Friends", "campaign_type": "REFERRAL_PROGRAM", "type": "AUTO_UPDATE", "vouchers_count": 1,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1000},
			"code_config": map[string]any{"pattern": "REF-#####"}},
		"referral_program": map[string]any{"conversion_event_type": "custom_event", "custom_event": map[string]any{"name": "signed_up"},
			"referee_reward": map[string]any{"related_object_parent": map[string]any{"id": p.points["id"]}, "type": "LOYALTY_CARD", "amount": 100},
			"referral_tiers": []any{
				map[string]any{"banner": "500 for each friend", "parameters": map[string]any{"type": "EACH_REFEREE",
					"reward": map[string]any{"related_object_parent": map[string]any{"id": "Credits"}, "type": "GIFT_VOUCHER", "amount": 500}}},
				map[string]any{"parameters": map[string]any{"type": "EVERY_N_REFEREES", "referees": 2,
					"reward": map[string]any{"related_object_parent": map[string]any{"id": p.points["id"]}, "type": "LOYALTY_CARD", "amount": 1000}}}}}}
	// The schema is in force on the regional side within moments.
	stacktest.Eventually(a.T, 3*time.Second, "the referral campaign created", func() bool {
		r := a.Do("POST", "/v1/campaigns", body)
		if r.Status == 200 {
			p.campaign = r.JSON(a.T)
		}
		return r.Status == 200
	})
	pub := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Friends", "customer": map[string]any{"source_id": "ann"}})
	p.code, p.ann = pub["voucher"].(map[string]any)["code"].(string), pub["customer_id"].(string)
	return p
}

func event(source string, referral map[string]any) map[string]any {
	return map[string]any{"event": "signed_up", "customer": map[string]any{"source_id": source}, "referral": referral}
}

// balanceIn is the customer's balance on their card (or gift card) of
// campaign, 0 when they hold none.
func balanceIn(a stacktest.API, customer, campaignID string) int64 {
	a.T.Helper()
	var n int64
	err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT COALESCE(
		(SELECT sum(balance) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2 AND holder_id = (SELECT id FROM customers WHERE project_id = $1 AND source_id = $3)),
		(SELECT sum((attrs->'gift'->>'balance')::INT8) FROM vouchers WHERE project_id = $1 AND campaign_id = $2 AND holder_id = (SELECT id FROM customers WHERE project_id = $1 AND source_id = $3)),
		0)`, a.P.ID, campaignID, customer).Scan(&n)
	if err != nil {
		a.T.Fatal(err)
	}
	return n
}

// deliveries counts the webhook deliveries the outbox holds for each
// event type (the rows written with the conversions).
func deliveries(a stacktest.API) map[string]int {
	a.T.Helper()
	rows, err := a.E.Stack.Regional["api"].Pool().Query(context.Background(), `SELECT (payload->>'body')::JSONB->>'type', count(*)
		FROM outbox WHERE project_id = $1 AND kind = 'webhook.deliver' GROUP BY 1`, a.P.ID)
	if err != nil {
		a.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var typ string
		var n int
		if err := rows.Scan(&typ, &n); err != nil {
			a.T.Fatal(err)
		}
		out[typ] = n
	}
	return out
}

func TestCustomEventConvertsEachRefereeOnceAndRewardsByTier(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.referred", "customer.rewarded", "customer.rewarded.loyalty_points", "voucher.gift.balance_added")
	p := setup(a)
	points, credits := p.points["id"].(string), p.credits["id"].(string)
	rp := p.campaign["referral_program"].(map[string]any)
	if p.campaign["campaign_type"] != "REFERRAL_PROGRAM" || p.campaign["voucher"].(map[string]any)["is_referral_code"] != true ||
		rp["conversion_event_type"] != "custom_event" || rp["custom_event"].(map[string]any)["id"] == nil ||
		len(rp["referral_tiers"].([]any)) != 2 || !strings.HasPrefix(p.code, "REF-") {
		t.Fatalf("campaign: %v, code %s", p.campaign, p.code)
	}
	// The program's code says it is one, read alone or listed.
	if v := a.OK("GET", "/v1/vouchers/"+p.code, nil); v["is_referral_code"] != true {
		t.Fatalf("the referral code read: %v", v)
	}
	for _, x := range a.OK("GET", "/v1/vouchers?campaign_id="+p.campaign["id"].(string), nil)["vouchers"].([]any) {
		if x.(map[string]any)["is_referral_code"] != true {
			t.Fatalf("the referral code listed: %v", x)
		}
	}
	// Published again by its code, to its holder: still a referral code.
	holder := a.OK("GET", "/v1/vouchers/"+p.code, nil)["holder_id"]
	if again := a.OK("POST", "/v1/publications", map[string]any{"voucher": p.code, "customer": holder}); again["voucher"].(map[string]any)["is_referral_code"] != true {
		t.Fatalf("the referral code published by its code: %v", again["voucher"])
	}
	// What a write accepts reads back.
	if got := a.OK("GET", "/v1/campaigns/"+p.campaign["id"].(string), nil); fmt.Sprint(got["referral_program"]) != fmt.Sprint(rp) {
		t.Fatalf("read back: %v, want %v", got["referral_program"], rp)
	}

	// bob converts: 100 points to him, 500 credits to ann (each referee);
	// the every-second tier waits for the next one.
	ev := a.OK("POST", "/v1/events", event("bob", map[string]any{"code": p.code}))
	if ev["object"] != "event" || ev["referral"] != nil {
		t.Fatalf("event: %v", ev)
	}
	check := func(when string, want map[[2]string]int64) {
		t.Helper()
		for k, n := range want {
			if got := balanceIn(a, k[0], k[1]); got != n {
				t.Fatalf("%s: %s's balance in %s is %d, want %d", when, k[0], k[1], got, n)
			}
		}
	}
	check("bob", map[[2]string]int64{{"bob", points}: 100, {"ann", credits}: 500, {"ann", points}: 0})
	// Again: counted once per referee.
	a.OK("POST", "/v1/events", event("bob", map[string]any{"code": p.code}))
	check("bob again", map[[2]string]int64{{"bob", points}: 100, {"ann", credits}: 500, {"ann", points}: 0})

	// cid's event sent eight times at once: converted once, the second referee.
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "cid"})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := a.Do("POST", "/v1/events", event("cid", map[string]any{"code": p.code})); r.Status != 200 {
				t.Errorf("concurrent event: %d %s", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	check("cid", map[[2]string]int64{{"cid", points}: 100, {"ann", credits}: 1000, {"ann", points}: 1000})
	// dee, then eve by referrer_id alone (ann's source id): the fourth
	// referee brings the second thousand.
	a.OK("POST", "/v1/events", event("dee", map[string]any{"code": p.code, "referrer_id": p.ann}))
	check("dee", map[[2]string]int64{{"ann", credits}: 1500, {"ann", points}: 1000})
	a.OK("POST", "/v1/events", event("eve", map[string]any{"referrer_id": "ann"}))
	check("eve", map[[2]string]int64{{"eve", points}: 100, {"ann", credits}: 2000, {"ann", points}: 2000})

	// The referrer's own code, a wrong referrer, an unknown code.
	a.Fails("POST", "/v1/events", event("ann", map[string]any{"code": p.code}), 400, "referrer_not_permitted_to_redeem")
	a.Fails("POST", "/v1/events", event("fay", map[string]any{"code": p.code, "referrer_id": "bob"}), 400, "invalid_payload")
	a.Fails("POST", "/v1/events", event("fay", map[string]any{"code": "NOPE-1"}), 404, "not_found")
	check("refused", map[[2]string]int64{{"ann", credits}: 2000, {"ann", points}: 2000, {"fay", points}: 0})

	// The referee's summary and the rewards' ledger entries.
	bob := a.OK("GET", "/v1/customers/bob", nil)
	refs := bob["referrals"].(map[string]any)
	item := refs["campaigns"].([]any)[0].(map[string]any)
	if refs["total"] != 1.0 || item["campaign_id"] != p.campaign["id"] || item["referrer_id"] != p.ann ||
		item["related_object_type"] != "custom_event" || !strings.HasPrefix(item["related_object_id"].(string), "evcus_") {
		t.Fatalf("bob's referrals: %v", refs)
	}
	if a.OK("GET", "/v1/customers/ann", nil)["referrals"].(map[string]any)["total"] != 0.0 {
		t.Fatal("ann was referred by no one")
	}
	act := a.OK("GET", "/v1/customers/bob/activity?order=created_at&limit=1", nil)["data"].([]any)[0].(map[string]any)
	if ref := act["data"].(map[string]any)["data"].(map[string]any)["referral"].(map[string]any); ref["referrer"].(map[string]any)["id"] != p.ann ||
		ref["voucher"].(map[string]any)["code"] != p.code {
		t.Fatalf("bob's activity: %v", act)
	}
	if s := a.OK("GET", "/v1/campaigns/Friends/summary", nil); s["referred_customers"] != 4.0 {
		t.Fatalf("summary: %v", s)
	}
	seen := 0
	for _, c := range a.OK("GET", "/v1/loyalties/"+points+"/members?limit=100", nil)["vouchers"].([]any) {
		if c.(map[string]any)["holder_id"] == bob["id"] {
			h := a.History(c.(map[string]any)["code"].(string))
			if len(h) != 1 || h[0]["type"] != "POINTS_ADDITION" || h[0]["details"].(map[string]any)["custom_event"] == nil {
				t.Fatalf("bob's card: %v", h)
			}
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("bob holds %d cards of the program", seen)
	}

	// Webhook events: queued in the conversions' transactions (the outbox),
	// and delivered.
	got := deliveries(a)
	want := map[string]int{"customer.referred": 4, "customer.rewarded": 4 + 4 + 2, "customer.rewarded.loyalty_points": 4 + 2,
		"voucher.gift.balance_added": 4}
	for typ, n := range want {
		if got[typ] != n {
			t.Fatalf("deliveries: %v, want %v", got, want)
		}
	}
	referred := hooks.Wait(t, "customer.referred", 4)
	if referred["referrer"].(map[string]any)["id"] != p.ann || referred["voucher"].(map[string]any)["code"] != p.code ||
		referred["campaign"].(map[string]any)["id"] != p.campaign["id"] || referred["custom_event"].(map[string]any)["type"] != "signed_up" {
		t.Fatalf("customer.referred: %v", referred)
	}
	hooks.Wait(t, "customer.rewarded", 10)
	if pts := hooks.Wait(t, "customer.rewarded.loyalty_points", 6); pts["balance"].(map[string]any)["points"] == nil {
		t.Fatalf("customer.rewarded.loyalty_points: %v", pts)
	}
}

func TestHoldersOfAReferralCode(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.holder.assignment.created", "customer.holder.assignment.deleted")
	p := setup(a)
	base := "/v1/referrals/members/" + p.code + "/holders"
	list := func(path string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, h := range a.OK("GET", path, nil)["data"].([]any) {
			out = append(out, h.(map[string]any))
		}
		return out
	}
	// The referrer holds the code from its publication.
	hs := list(base)
	if len(hs) != 1 || hs[0]["holder_role"] != "REFERRER" || hs[0]["customer_id"] != p.ann || hs[0]["object"] != "redeemable_holder" ||
		!strings.HasPrefix(hs[0]["id"].(string), "rh_") || hs[0]["campaign_type"] != "REFERRAL_PROGRAM" {
		t.Fatalf("holders: %v", hs)
	}

	// Referees added, all or nothing: upserted customers, metadata.
	added := a.OK("POST", base, map[string]any{"holders": []any{
		map[string]any{"source_id": "gus", "name": "Gus"}, map[string]any{"source_id": "hal", "email": "hal@example.com"}},
		"metadata": map[string]any{"influencer": true}})["holders"].([]any)
	if len(added) != 2 || added[0].(map[string]any)["holder_role"] != "REFEREE" ||
		added[1].(map[string]any)["metadata"].(map[string]any)["influencer"] != true {
		t.Fatalf("added: %v", added)
	}
	if a.OK("GET", "/v1/customers/hal", nil)["email"] != "hal@example.com" {
		t.Fatal("hal upserted")
	}
	again := a.OK("POST", "/v1/referrals/"+p.campaign["id"].(string)+"/members/"+p.code+"/holders",
		map[string]any{"holders": []any{map[string]any{"source_id": "gus"}}})["holders"].([]any)
	if again[0].(map[string]any)["id"] != added[0].(map[string]any)["id"] {
		t.Fatalf("a holder added again: %v", again)
	}
	a.Fails("POST", base, map[string]any{"holders": []any{map[string]any{"source_id": "ivy"}, map[string]any{"source_id": "ann"}}},
		400, "referrer_not_permitted_to_redeem")
	if r := a.Do("GET", "/v1/customers/ivy", nil); r.Status != 404 {
		t.Fatalf("all or nothing: ivy %d", r.Status)
	}
	a.Fails("POST", base, map[string]any{"holders": []any{}}, 400, "invalid_payload")
	a.Fails("POST", base, map[string]any{"holders": []any{map[string]any{"name": "no key"}}}, 400, "invalid_payload")

	// A converted referee holds the code too.
	stacktest.Eventually(t, 3*time.Second, "the event accepted", func() bool {
		return a.Do("POST", "/v1/events", event("jo", map[string]any{"code": p.code})).Status == 200
	})
	hs = list(base + "?limit=100")
	if len(hs) != 4 || hs[3]["holder_role"] != "REFEREE" {
		t.Fatalf("holders after a conversion: %v", hs)
	}
	// Filters, order and pages.
	if r := list(base + "?filters[holder_role][conditions][$is]=REFEREE"); len(r) != 3 {
		t.Fatalf("referees: %v", r)
	}
	first := a.OK("GET", base+"?limit=2&order=-id", nil)
	if first["has_more"] != true || first["total"] != 4.0 || first["data"].([]any)[0].(map[string]any)["id"] != hs[3]["id"] {
		t.Fatalf("first page: %v", first)
	}
	if rest := list(base + "?limit=2&order=-id&starting_after_id=" + first["more_starting_after"].(string)); len(rest) != 2 || rest[1]["id"] != hs[0]["id"] {
		t.Fatalf("second page: %v", rest)
	}

	// Removal: referees only, of this code only.
	a.Fails("DELETE", base+"/"+hs[0]["id"].(string), nil, 400, "referrer_not_removable")
	if r := a.Do("DELETE", "/v1/referrals/"+p.campaign["id"].(string)+"/members/"+p.code+"/holders/"+hs[1]["id"].(string), nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("DELETE", base+"/"+hs[1]["id"].(string), nil, 404, "not_found")
	if len(list(base)) != 3 {
		t.Fatal("the referee removed")
	}
	hooks.Wait(t, "customer.holder.assignment.created", 2)
	if d := hooks.Wait(t, "customer.holder.assignment.deleted", 1); d["holder"].(map[string]any)["id"] != hs[1]["id"] {
		t.Fatalf("customer.holder.assignment.deleted: %v", d)
	}

	// What is not a referral code of the campaign is not found.
	a.Fails("GET", "/v1/referrals/members/NOPE/holders", nil, 404, "not_found")
	a.Fails("GET", "/v1/referrals/Credits/members/"+p.code+"/holders", nil, 404, "not_found")
	a.Fails("GET", "/v1/referrals/Nope/members/"+p.code+"/holders", nil, 404, "not_found")
	a.OK("POST", "/v1/vouchers/PLAIN-1", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}})
	a.Fails("GET", "/v1/referrals/members/PLAIN-1/holders", nil, 404, "not_found")
	a.Fails("GET", base+"?filters[holder_role][conditions][$bogus]=x", nil, 400, "")
}

func TestAnotherProjectsReferralProgramIsNotFound(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	p := setup(a)
	b := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	r := b.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+b.P.ID+"/custom-event-schemas", b.E.MgmtHeader(),
		map[string]any{"name": "signed_up", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 {
		t.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	b.Fails("GET", "/v1/campaigns/"+p.campaign["id"].(string), nil, 404, "not_found")
	b.Fails("GET", "/v1/referrals/members/"+p.code+"/holders", nil, 404, "not_found")
	b.Fails("POST", "/v1/referrals/members/"+p.code+"/holders", map[string]any{"holders": []any{map[string]any{"source_id": "x"}}}, 404, "not_found")
	b.Fails("DELETE", "/v1/referrals/"+p.campaign["id"].(string)+"/members/"+p.code+"/holders/rh_x", nil, 404, "not_found")
	stacktest.Eventually(t, 3*time.Second, "another project's code refused", func() bool {
		r := b.Do("POST", "/v1/events", event("bob", map[string]any{"code": p.code}))
		return r.Status == 404 && r.JSON(t)["resource_type"] == "voucher"
	})
	// Its rewards name campaigns of its own project only.
	b.Fails("POST", "/v1/campaigns", map[string]any{"name": "Theirs", "campaign_type": "REFERRAL_PROGRAM",
		"voucher": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}},
		"referral_program": map[string]any{"conversion_event_type": "redemption",
			"referee_reward": map[string]any{"related_object_parent": map[string]any{"id": p.points["id"]}, "type": "LOYALTY_CARD", "amount": 1}}},
		400, "invalid_payload")
}

func TestReferralProgramsAreChecked(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("campaign.referral_tier.created", "campaign.referral_tier.updated", "campaign.referral_tier.deleted")
	p := setup(a)
	body := func(rp any) map[string]any {
		return map[string]any{"name": "Bad", "campaign_type": "REFERRAL_PROGRAM", "referral_program": rp,
			"voucher": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}}
	}
	reward := func(typ, id string, amount any) map[string]any {
		return map[string]any{"related_object_parent": map[string]any{"id": id}, "type": typ, "amount": amount}
	}
	for name, rp := range map[string]any{
		"missing":              nil,
		"not an object":        "custom_event",
		"no conversion":        map[string]any{},
		"bad conversion":       map[string]any{"conversion_event_type": "order"},
		"no custom event":      map[string]any{"conversion_event_type": "custom_event"},
		"unknown custom event": map[string]any{"conversion_event_type": "custom_event", "custom_event": map[string]any{"name": "nope"}},
		"custom event of a redemption": map[string]any{"conversion_event_type": "redemption",
			"custom_event": map[string]any{"name": "signed_up"}},
		"reward type":         map[string]any{"conversion_event_type": "redemption", "referee_reward": reward("CASH", "Points", 1)},
		"reward of a gift":    map[string]any{"conversion_event_type": "redemption", "referee_reward": reward("LOYALTY_CARD", "Credits", 1)},
		"reward amount":       map[string]any{"conversion_event_type": "redemption", "referee_reward": reward("LOYALTY_CARD", "Points", 0)},
		"reward amount float": map[string]any{"conversion_event_type": "redemption", "referee_reward": reward("LOYALTY_CARD", "Points", 1.5)},
		"reward amount huge":  map[string]any{"conversion_event_type": "redemption", "referee_reward": reward("LOYALTY_CARD", "Points", json.RawMessage("1e400"))},
		"tier type": map[string]any{"conversion_event_type": "redemption", "referral_tiers": []any{
			map[string]any{"parameters": map[string]any{"type": "SOMETIMES", "reward": reward("GIFT_VOUCHER", "Credits", 1)}}}},
		"tier without n": map[string]any{"conversion_event_type": "redemption", "referral_tiers": []any{
			map[string]any{"parameters": map[string]any{"type": "EVERY_N_REFEREES", "reward": reward("GIFT_VOUCHER", "Credits", 1)}}}},
		"tier without reward": map[string]any{"conversion_event_type": "redemption", "referral_tiers": []any{
			map[string]any{"parameters": map[string]any{"type": "EACH_REFEREE"}}}},
	} {
		r := a.Do("POST", "/v1/campaigns", body(rp))
		if r.Status != 400 {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	bad := body(map[string]any{"conversion_event_type": "redemption"})
	bad["voucher"] = map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1}}
	a.Fails("POST", "/v1/campaigns", bad, 400, "invalid_payload")

	// An update replaces the program; tiers keep the ids they name.
	id := p.campaign["id"].(string)
	tiers := p.campaign["referral_program"].(map[string]any)["referral_tiers"].([]any)
	kept := tiers[0].(map[string]any)
	kept["banner"] = "now 600"
	kept["parameters"].(map[string]any)["reward"].(map[string]any)["amount"] = 600
	up := a.OK("PUT", "/v1/campaigns/"+id, map[string]any{"description": "friends",
		"referral_program": map[string]any{"conversion_event_type": "redemption", "referral_tiers": []any{kept}}})
	rp := up["referral_program"].(map[string]any)
	nt := rp["referral_tiers"].([]any)
	if up["description"] != "friends" || rp["conversion_event_type"] != "redemption" || rp["custom_event"] != nil || len(nt) != 1 ||
		nt[0].(map[string]any)["id"] != kept["id"] || nt[0].(map[string]any)["banner"] != "now 600" {
		t.Fatalf("updated: %v", up)
	}
	// The program's tiers raised their events: two created with it, the
	// kept one updated, the other deleted.
	hooks.Wait(t, "campaign.referral_tier.created", 2)
	if u := hooks.Wait(t, "campaign.referral_tier.updated", 1)["referral_tier"].(map[string]any); u["id"] != kept["id"] || u["banner"] != "now 600" ||
		u["campaign_id"] != id {
		t.Fatalf("tier updated: %v", u)
	}
	if d := hooks.Wait(t, "campaign.referral_tier.deleted", 1)["referral_tier"].(map[string]any); d["id"] != tiers[1].(map[string]any)["id"] {
		t.Fatalf("tier deleted: %v", d)
	}
	if hooks.Count("campaign.referral_tier.created") != 2 || hooks.Count("campaign.referral_tier.updated") != 1 {
		t.Fatalf("tier events: %d created, %d updated", hooks.Count("campaign.referral_tier.created"), hooks.Count("campaign.referral_tier.updated"))
	}
	a.Fails("PUT", "/v1/campaigns/"+id, map[string]any{"referral_program": map[string]any{"conversion_event_type": "x"}}, 400, "invalid_payload")
	// A program converting on redemptions converts nobody by an event.
	stacktest.Eventually(t, 3*time.Second, "the event accepted", func() bool {
		return a.Do("POST", "/v1/events", event("kim", map[string]any{"code": p.code})).Status == 200
	})
	if a.OK("GET", "/v1/customers/kim", nil)["referrals"].(map[string]any)["total"] != 0.0 {
		t.Fatal("kim converted by an event of a redemption program")
	}
}

// A program converting on redemption: a referee who redeems the code in a
// stacked redemption (POST /v1/redemptions) converts once, in the
// redemption's transaction, with the referee's reward and the referrer's
// tier; redeeming it again rewards nothing more, a rollback leaves the
// conversion standing, and the referrer's own code is refused.
func TestRedemptionOfAReferralCodeConvertsTheRefereeOnce(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.referred", "customer.rewarded")
	points := a.Campaign("Points", map[string]any{"type": "AUTO_UPDATE"})
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Bring a friend", "campaign_type": "REFERRAL_PROGRAM", "type": "AUTO_UPDATE",
		"vouchers_count": 1, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1000},
			"code_config": map[string]any{"pattern": "BRING-#####"}},
		"referral_program": map[string]any{"conversion_event_type": "redemption",
			"referee_reward": map[string]any{"related_object_parent": map[string]any{"id": points["id"]}, "type": "LOYALTY_CARD", "amount": 100},
			"referral_tiers": []any{map[string]any{"parameters": map[string]any{"type": "EACH_REFEREE",
				"reward": map[string]any{"related_object_parent": map[string]any{"id": points["id"]}, "type": "LOYALTY_CARD", "amount": 300}}}}}})
	pub := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Bring a friend", "customer": map[string]any{"source_id": "ann"}})
	code, ann := pub["voucher"].(map[string]any)["code"].(string), pub["customer_id"].(string)
	redeem := func(who string) map[string]any {
		return map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"customer": map[string]any{"source_id": who}, "order": map[string]any{"amount": 5000}}
	}

	// The referrer's own code: refused, in validation and redemption alike.
	a.Fails("POST", "/v1/redemptions", redeem("ann"), 400, "referrer_not_permitted_to_redeem")
	if v := a.OK("POST", "/v1/validations", redeem("ann")); v["valid"] != false {
		t.Fatalf("the referrer's own code validated: %v", v)
	}

	// Bob redeems it: converted, rewarded, and ann rewarded by her tier.
	r := a.OK("POST", "/v1/redemptions", redeem("bob"))
	kid := r["redemptions"].([]any)[0].(map[string]any)
	if got := balanceIn(a, "bob", points["id"].(string)); got != 100 {
		t.Fatalf("bob's points: %d, want 100", got)
	}
	if got := balanceIn(a, "ann", points["id"].(string)); got != 300 {
		t.Fatalf("ann's points: %d, want 300", got)
	}
	bob := a.OK("GET", "/v1/customers/bob", nil)
	refs := bob["referrals"].(map[string]any)
	item := refs["campaigns"].([]any)[0].(map[string]any)
	if refs["total"] != 1.0 || item["referrer_id"] != ann || item["related_object_type"] != "redemption" || item["related_object_id"] != kid["id"] {
		t.Fatalf("bob's referrals: %v", refs)
	}
	ev := hooks.Wait(t, "customer.referred", 1)
	if ev["customer"].(map[string]any)["id"] != bob["id"] || ev["referrer"].(map[string]any)["id"] != ann ||
		ev["redemption"].(map[string]any)["id"] != kid["id"] {
		t.Fatalf("customer.referred: %v", ev)
	}

	// Again: the redemption succeeds, nobody is converted or rewarded twice.
	a.OK("POST", "/v1/redemptions", redeem("bob"))
	if b, an := balanceIn(a, "bob", points["id"].(string)), balanceIn(a, "ann", points["id"].(string)); b != 100 || an != 300 {
		t.Fatalf("after a second redemption: bob %d, ann %d", b, an)
	}
	// The first redemption rolled back: the conversion stands.
	a.OK("POST", "/v1/redemptions/"+r["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	if b := balanceIn(a, "bob", points["id"].(string)); b != 100 {
		t.Fatalf("after the rollback: bob %d", b)
	}
	// A second referee converts too: one more tier reward for ann.
	a.OK("POST", "/v1/redemptions", redeem("cid"))
	if c, an := balanceIn(a, "cid", points["id"].(string)), balanceIn(a, "ann", points["id"].(string)); c != 100 || an != 600 {
		t.Fatalf("a second referee: cid %d, ann %d", c, an)
	}
	time.Sleep(200 * time.Millisecond)
	if d := deliveries(a); d["customer.referred"] != 2 || d["customer.rewarded"] != 4 {
		t.Fatalf("webhook events: %v", d)
	}
}

// A referral program is a campaign of the one model: listed by its type,
// read by id or name, updated, enabled and disabled, and deleted for good
// with its codes and its referrers' holdings.
func TestReferralCampaignLifecycle(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	p := setup(a)
	id := p.campaign["id"].(string)
	l := a.OK("GET", "/v1/campaigns?campaign_type=REFERRAL_PROGRAM", nil)
	if l["total"] != 1.0 || l["campaigns"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("listed: %v", l)
	}
	if g := a.OK("GET", "/v1/campaigns/Friends", nil); g["id"] != id || g["referral_program"] == nil {
		t.Fatalf("by name: %v", g)
	}
	if u := a.OK("PUT", "/v1/campaigns/"+id, map[string]any{"description": "bring a friend"}); u["description"] != "bring a friend" ||
		u["referral_program"].(map[string]any)["conversion_event_type"] != "custom_event" {
		t.Fatalf("updated: %v", u)
	}
	if d := a.OK("POST", "/v1/campaigns/"+id+"/disable", nil); d["active"] != false {
		t.Fatalf("disabled: %v", d)
	}
	a.OK("POST", "/v1/campaigns/"+id+"/enable", nil)
	r := a.Do("DELETE", "/v1/campaigns/"+id+"?force=true", nil)
	if r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if act, _ := r.JSON(t)["async_action_id"].(string); act != "" {
		a.WaitAction(act)
	}
	a.Fails("GET", "/v1/campaigns/"+id, nil, 404, "not_found")
	a.Fails("GET", "/v1/vouchers/"+p.code, nil, 404, "not_found")
	if l := a.OK("GET", "/v1/campaigns?campaign_type=REFERRAL_PROGRAM", nil); l["total"] != 0.0 {
		t.Fatalf("listed after deletion: %v", l)
	}
}

// A referral tier that requires a segment counts only the referees in it
// when they convert (the segment read as validation rules read it: the
// customer's stored data through the filter), towards its own count: every
// second VIP referee rewards the referrer, whoever else converted between.
func TestReferralTierRequiringASegmentCountsOnlyItsReferees(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	points := a.Campaign("Points", map[string]any{"type": "AUTO_UPDATE"})
	vip := a.OK("POST", "/v1/segments", map[string]any{"name": "VIP", "type": "auto-update",
		"filter": map[string]any{"junction": "and", "metadata.vip": map[string]any{"conditions": map[string]any{"$is": []any{"yes"}}}}})
	tier := func(seg any) map[string]any {
		return map[string]any{"conversion_event_type": "redemption", "referral_tiers": []any{map[string]any{"parameters": map[string]any{
			"type": "EVERY_N_REFEREES", "referees": 2, "segment": seg,
			"reward": map[string]any{"related_object_parent": map[string]any{"id": points["id"]}, "type": "LOYALTY_CARD", "amount": 700}}}}}
	}
	body := func(name string, rp map[string]any) map[string]any {
		return map[string]any{"name": name, "campaign_type": "REFERRAL_PROGRAM", "type": "AUTO_UPDATE", "vouchers_count": 1,
			"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
				"code_config": map[string]any{"pattern": "VIP-#####"}}, "referral_program": rp}
	}
	a.Fails("POST", "/v1/campaigns", body("Bad", tier(map[string]any{"id": "seg_nope"})), 404, "not_found")
	a.Fails("POST", "/v1/campaigns", body("Bad", tier(map[string]any{})), 400, "invalid_payload")
	c := a.OK("POST", "/v1/campaigns", body("VIPs", tier(map[string]any{"id": vip["id"]})))
	if s := c["referral_program"].(map[string]any)["referral_tiers"].([]any)[0].(map[string]any)["parameters"].(map[string]any)["segment"]; s == nil ||
		s.(map[string]any)["id"] != vip["id"] {
		t.Fatalf("the tier's segment reads back: %v", c["referral_program"])
	}
	pub := a.OK("POST", "/v1/publications", map[string]any{"campaign": "VIPs", "customer": map[string]any{"source_id": "ann"}})
	code := pub["voucher"].(map[string]any)["code"].(string)
	redeem := func(who, isVIP string) {
		t.Helper()
		a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"customer": map[string]any{"source_id": who, "metadata": map[string]any{"vip": isVIP}}, "order": map[string]any{"amount": 5000}})
	}
	for _, step := range []struct {
		who, vip string
		ann      int64 // ann's points after
	}{{"bob", "yes", 0}, {"cid", "no", 0}, {"dee", "no", 0}, {"eve", "yes", 700}, {"fay", "yes", 700}, {"gus", "no", 700}, {"hal", "yes", 1400}} {
		redeem(step.who, step.vip)
		if got := balanceIn(a, "ann", points["id"].(string)); got != step.ann {
			t.Fatalf("after %s (vip %s): ann has %d points, want %d", step.who, step.vip, got, step.ann)
		}
	}
}
