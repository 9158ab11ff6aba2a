package loyalty_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func last(txs []map[string]any) map[string]any { return txs[len(txs)-1] }

func TestRewardsAreRedeemedWithPointsAndRolledBack(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	ev := a.Subscribe("redemption.succeeded", "redemption.rollback.succeeded", "reward.created")
	campID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})

	// Rewards: what cannot be served is refused, saying what is wrong.
	a.Fails("POST", "/v1/rewards", map[string]any{"parameters": map[string]any{"product": map[string]any{"id": "prod_1"}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X", "parameters": map[string]any{"product": map[string]any{"id": "p"},
		"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X", "parameters": map[string]any{"campaign": map[string]any{"id": campID}}},
		400, "feature_not_available")
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X", "parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 0, "points_ratio": 10}}},
		400, "invalid_payload")
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X", "stock": -1, "parameters": map[string]any{"product": map[string]any{"id": "p"}}},
		400, "invalid_payload")
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "stock": 2, "attributes": map[string]any{"description": "A mug"},
		"parameters": map[string]any{"product": map[string]any{"id": "prod_mug", "sku_id": "sku_blue"}}, "metadata": map[string]any{"shelf": "A"}})
	if !strings.HasPrefix(mug["id"].(string), "rew_") || mug["type"] != "MATERIAL" || mug["object"] != "reward" || mug["stock"] != 2.0 ||
		mug["redeemed"] != 0.0 || mug["attributes"].(map[string]any)["description"] != "A mug" {
		t.Fatalf("reward: %v", mug)
	}
	mugID := mug["id"].(string)
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})
	coinID := coin["id"].(string)
	big := a.OK("POST", "/v1/rewards", map[string]any{"name": "Bike", "parameters": map[string]any{"product": map[string]any{"id": "prod_bike"}}})
	lone := a.OK("POST", "/v1/rewards", map[string]any{"name": "Unoffered", "parameters": map[string]any{"product": map[string]any{"id": "prod_x"}}})
	if l := a.OK("GET", "/v1/rewards?limit=2", nil); l["total"] != 4.0 || len(l["data"].([]any)) != 2 || l["has_more"] != true {
		t.Fatalf("rewards list: %v", l)
	}
	if u := a.OK("PUT", "/v1/rewards/"+mugID, map[string]any{"name": "Blue mug"}); u["name"] != "Blue mug" || u["stock"] != 2.0 || u["updated_at"] == nil {
		t.Fatalf("reward update: %v", u)
	}
	a.Fails("PUT", "/v1/rewards/"+mugID, map[string]any{"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 1}}},
		400, "invalid_payload")
	ev.Wait(t, "reward.created", 4)

	// Assignments price rewards in the campaign.
	as := a.OK("POST", "/v1/loyalties/"+campID+"/rewards", []map[string]any{{"reward": mugID, "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}}})
	if !strings.HasPrefix(as["id"].(string), "rewa_") || as["object"] != "reward_assignment" || as["reward_id"] != mugID ||
		as["related_object_id"] != campID || as["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 100.0 {
		t.Fatalf("assignment: %v", as)
	}
	a.Fails("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": mugID, "parameters": map[string]any{"loyalty": map[string]any{"points": 5}}}, 409, "duplicate_found")
	a.Fails("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": coinID, "parameters": map[string]any{"loyalty": map[string]any{"points": 5}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": big["id"]}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": "rew_nope", "parameters": map[string]any{"loyalty": map[string]any{"points": 5}}}, 404, "not_found")
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": coinID})
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": big["id"], "parameters": map[string]any{"loyalty": map[string]any{"points": 10000}}})
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/rewards", nil); l["total"] != 3.0 {
		t.Fatalf("assignments: %v", l)
	}
	if g := a.OK("GET", "/v1/loyalties/"+campID+"/rewards/"+as["id"].(string), nil); g["id"] != as["id"] {
		t.Fatalf("assignment get: %v", g)
	}

	// A redemption for an order it describes.
	red := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID},
		"order": map[string]any{"source_id": "ord-r1", "amount": 3000}, "metadata": map[string]any{"till": 4}})
	if !strings.HasPrefix(red["id"].(string), "r_") || red["object"] != "redemption" || red["result"] != "SUCCESS" || red["status"] != "SUCCEEDED" ||
		red["loyalty_card"].(map[string]any)["points"] != 100.0 || red["related_object_id"] == nil || red["related_object_type"] != "voucher" ||
		red["customer_id"] == nil || red["tracking_id"] != "ann" || red["order"].(map[string]any)["source_id"] != "ord-r1" ||
		red["metadata"].(map[string]any)["till"] != 4.0 || card(red["voucher"].(map[string]any))["balance"] != 400.0 {
		t.Fatalf("redemption: %v", red)
	}
	if rw := red["reward"].(map[string]any); rw["id"] != mugID || rw["assignment_id"] != as["id"] || rw["type"] != "MATERIAL" ||
		rw["product"].(map[string]any)["id"] != "prod_mug" || rw["sku"].(map[string]any)["id"] != "sku_blue" {
		t.Fatalf("redemption reward: %v", rw)
	}
	redID := red["id"].(string)
	tx := last(a.History(code))
	stacktest.CheckTx(t, tx, "POINTS_REDEMPTION", "balance", "order", "redemption", "reward")
	d := tx["details"].(map[string]any)
	if tx["source"] != nil || tx["reason"] != nil || tx["source_id"] != nil || d["balance"].(map[string]any)["points"] != -100.0 ||
		d["balance"].(map[string]any)["balance"] != 400.0 || d["balance"].(map[string]any)["total"] != 500.0 ||
		d["redemption"].(map[string]any)["id"] != redID || d["reward"].(map[string]any)["name"] != "Blue mug" ||
		d["order"].(map[string]any)["source_id"] != "ord-r1" {
		t.Fatalf("redemption entry: %v", tx)
	}
	m := a.OK("GET", "/v1/loyalties/members/"+code, nil)
	if lc := card(m); lc["balance"] != 400.0 || lc["points"] != 500.0 || m["redemption"].(map[string]any)["redeemed_points"] != 100.0 {
		t.Fatalf("card after redemption: %v", m)
	}
	if g := a.OK("GET", "/v1/redemptions/"+redID, nil); g["status"] != "SUCCEEDED" || g["id"] != redID {
		t.Fatalf("redemption get: %v", g)
	}
	if g := a.OK("GET", "/v1/rewards/"+mugID, nil); g["redeemed"] != 1.0 {
		t.Fatalf("reward after a redemption: %v", g)
	}
	if o := ev.Wait(t, "redemption.succeeded", 1); o["redemption"].(map[string]any)["id"] != redID {
		t.Fatalf("redemption event: %v", o)
	}

	// The rollback returns the points, once.
	rb := a.OK("POST", "/v1/redemptions/"+redID+"/rollback?reason=changed+mind", nil)
	if !strings.HasPrefix(rb["id"].(string), "rr_") || rb["object"] != "redemption_rollback" || rb["redemption"] != redID ||
		rb["reason"] != "changed mind" || rb["result"] != "SUCCESS" || card(rb["voucher"].(map[string]any))["balance"] != 500.0 {
		t.Fatalf("rollback: %v", rb)
	}
	tx = last(a.History(code))
	stacktest.CheckTx(t, tx, "POINTS_REFUND", "balance", "order", "redemption", "rollback", "reward")
	d = tx["details"].(map[string]any)
	if d["balance"].(map[string]any)["points"] != 100.0 || d["balance"].(map[string]any)["balance"] != 500.0 ||
		d["rollback"].(map[string]any)["id"] != rb["id"] || d["redemption"].(map[string]any)["id"] != redID ||
		d["reward"].(map[string]any)["id"] != mugID || d["order"].(map[string]any)["source_id"] != "ord-r1" {
		t.Fatalf("refund entry: %v", tx)
	}
	if g := a.OK("GET", "/v1/rewards/"+mugID, nil); g["redeemed"] != 0.0 {
		t.Fatalf("reward after the rollback: %v", g)
	}
	// The rewards list filtered by an assignment asks loyalty, which owns them.
	if l := a.OK("GET", "/v1/rewards?assignment_id="+as["id"].(string), nil); l["total"] != 1.0 || l["data"].([]any)[0].(map[string]any)["id"] != mugID {
		t.Fatalf("rewards of an assignment: %v", l)
	}
	if l := a.OK("GET", "/v1/rewards?assignment_id=rewa_nope", nil); l["total"] != 0.0 {
		t.Fatalf("rewards of no assignment: %v", l)
	}
	a.Fails("POST", "/v1/redemptions/"+redID+"/rollback", nil, 400, "already_rolled_back")
	a.Fails("POST", "/v1/redemptions/r_nope/rollback", nil, 404, "not_found")
	g := a.OK("GET", "/v1/redemptions/"+redID, nil)
	if g["status"] != "ROLLED_BACK" || g["related_redemptions"].(map[string]any)["rollbacks"].([]any)[0].(map[string]any)["id"] != rb["id"] {
		t.Fatalf("rolled-back redemption: %v", g)
	}
	if g := a.OK("GET", "/v1/redemptions/"+rb["id"].(string), nil); g["object"] != "redemption_rollback" {
		t.Fatalf("rollback get: %v", g)
	}
	m = a.OK("GET", "/v1/loyalties/members/"+code, nil)
	if lc := card(m); lc["balance"] != 500.0 || m["redemption"].(map[string]any)["redeemed_points"] != 0.0 {
		t.Fatalf("card after rollback: %v", m)
	}
	ev.Wait(t, "redemption.rollback.succeeded", 1)

	// Stock: two units, then none until one comes back.
	r1 := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID}})
	a.OK("POST", "/v1/loyalties/"+campID+"/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID}})
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID}}, 400, "quantity_exceeded")
	a.OK("POST", "/v1/redemptions/"+r1["id"].(string)+"/rollback", map[string]any{"reason": "returned"})
	a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID}})
	a.Fails("PUT", "/v1/rewards/"+mugID, map[string]any{"stock": 1}, 400, "invalid_payload")
	// balance: 500 - 2×100 = 300

	// What the card or the campaign cannot pay for.
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": big["id"]}}, 400, "loyalty_card_points_exceeded")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": lone["id"]}}, 400, "reward_not_assigned")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": "rew_nope"}}, 404, "not_found")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mugID, "points": 3}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/members/LC-NOPE/redemption", map[string]any{"reward": map[string]any{"id": mugID}}, 404, "not_found")

	// Pay with points: 10 points to 1.00, so a 25.00 order takes 250, in
	// parts or at once, and no more.
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": coinID}}, 400, "invalid_payload")
	part := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": coinID, "points": 20},
		"order": map[string]any{"source_id": "ord-coin", "amount": 2500}})
	if part["amount"] != 200.0 || part["loyalty_card"].(map[string]any)["points"] != 20.0 || card(part["voucher"].(map[string]any))["balance"] != 280.0 {
		t.Fatalf("partial coin redemption: %v", part)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": coinID, "points": 231},
		"order": map[string]any{"id": "ord-coin"}}, 400, "invalid_payload")
	rest := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": coinID},
		"order": map[string]any{"source_id": "ord-coin"}})
	if rest["amount"] != 2300.0 || rest["loyalty_card"].(map[string]any)["points"] != 230.0 || card(rest["voucher"].(map[string]any))["balance"] != 50.0 {
		t.Fatalf("coin redemption of the rest: %v", rest)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": coinID},
		"order": map[string]any{"source_id": "ord-coin"}}, 400, "invalid_payload")

	// Another project sees none of it.
	other := api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
	other.Fails("GET", "/v1/redemptions/"+redID, nil, 404, "not_found")
	other.Fails("GET", "/v1/rewards/"+mugID, nil, 404, "not_found")
	other.Fails("POST", "/v1/redemptions/"+redID+"/rollback", nil, 404, "not_found")

	// A deleted reward leaves its campaign; its redemptions keep its name.
	if r := a.Do("DELETE", "/v1/rewards/"+mugID, nil); r.Status != 204 {
		t.Fatalf("delete reward: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/rewards/"+mugID, nil, 404, "not_found")
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/rewards", nil); l["total"] != 2.0 {
		t.Fatalf("assignments after a reward's deletion: %v", l)
	}
	if g := a.OK("GET", "/v1/redemptions/"+redID, nil); g["reward"].(map[string]any)["name"] != "Blue mug" {
		t.Fatalf("redemption of a deleted reward: %v", g)
	}
}

func TestConcurrentRedemptionsTakeExactlyTheBalance(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	_, a := start(t)
	campID := a.Campaign("Rush", nil)["id"].(string)
	code := a.Member(campID, "bob")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})
	w := a.OK("POST", "/v1/rewards", map[string]any{"name": "Voucher", "parameters": map[string]any{"product": map[string]any{"id": "prod_v"}}})
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": w["id"], "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}})

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	var bad []string
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.Do("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": w["id"]}})
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status != 200 && !strings.Contains(string(r.Body), `"loyalty_card_points_exceeded"`) {
				bad = append(bad, string(r.Body))
			}
		}()
	}
	wg.Wait()
	if statuses[200] != 5 || statuses[400] != 15 || len(bad) > 0 {
		t.Fatalf("20 redemptions of 100 on 500 points: %v, unexpected answers %v", statuses, bad)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["balance"] != 0.0 {
		t.Fatalf("card: %v", lc)
	}
	n := 0
	for _, tx := range a.History(code) {
		if tx["type"] == "POINTS_REDEMPTION" {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d redemption entries, want 5", n)
	}
}

func TestPointsExpireAfterTheirDate(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	ev := a.Subscribe("voucher.loyalty_card.points_expired")
	campID := a.Campaign("Expiring", nil)["id"].(string)
	code := a.Member(campID, "cy")["code"].(string)
	today := e.Clock.Today()
	d10, d20 := today.AddDate(0, 0, 10).Format(time.DateOnly), today.AddDate(0, 0, 20).Format(time.DateOnly)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 100, "expiration_type": "CUSTOM_DATE", "expiration_date": d10})
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 50, "expiration_type": "CUSTOM_DATE", "expiration_date": d20})
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 30, "expiration_type": "NON_EXPIRING"})
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": -20}) // from the soonest: 80 left of d10

	l := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+code+"/points-expiration", nil)
	data := l["data"].([]any)
	if l["total"] != 2.0 || len(data) != 2 {
		t.Fatalf("points expiration: %v", l)
	}
	b0 := data[0].(map[string]any)
	if b0["expires_at"] != d10 || b0["bucket"].(map[string]any)["total_points"] != 80.0 || b0["object"] != "loyalty_points_bucket" ||
		b0["status"] != "ACTIVE" || b0["voucher_id"] == nil || b0["campaign_id"] != campID || b0["created_at"] == nil || b0["updated_at"] == nil {
		t.Fatalf("first bucket: %v", b0)
	}
	if b1 := data[1].(map[string]any); b1["expires_at"] != d20 || b1["bucket"].(map[string]any)["total_points"] != 50.0 {
		t.Fatalf("second bucket: %v", b1)
	}
	a.Fails("GET", "/v1/loyalties/"+campID+"/members/"+code+"/points-expiration?page=2", nil, 400, "invalid_query_params")

	// Points dated D are good through D.
	e.Clock.Advance(10 * 24 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	if n := len(a.History(code)); n != 4 {
		t.Fatalf("points expired on their last day: %d entries", n)
	}
	e.Clock.Advance(24 * time.Hour)
	stacktest.Eventually(t, 10*time.Second, "an expiration", func() bool { return len(a.History(code)) == 5 })
	tx := last(a.History(code))
	stacktest.CheckTx(t, tx, "POINTS_EXPIRATION", "balance")
	if b := tx["details"].(map[string]any)["balance"].(map[string]any); b["points"] != -80.0 || b["balance"] != 80.0 || b["total"] != 80.0 {
		t.Fatalf("expiration entry: %v", tx)
	}
	lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil))
	if lc["expired_points"] != 80.0 || lc["balance"] != 80.0 || lc["next_expiration_date"] != d20 || lc["next_expiration_points"] != 50.0 {
		t.Fatalf("card after expiration: %v", lc)
	}
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+code+"/points-expiration", nil); l["total"] != 1.0 {
		t.Fatalf("points expiration after the sweep: %v", l)
	}
	ev.Wait(t, "voucher.loyalty_card.points_expired", 1)
	// The sweep runs on: nothing expires twice.
	time.Sleep(200 * time.Millisecond)
	if n := len(a.History(code)); n != 5 {
		t.Fatalf("%d entries after more sweeps", n)
	}
}

func TestTiersFollowTheBalanceAndShapeAccruals(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	ev := a.Subscribe("customer.loyalty.tier.joined", "customer.loyalty.tier.left", "customer.loyalty.tier.upgraded")
	campID := a.Campaign("Tiered", nil)["id"].(string)
	code := a.Member(campID, "dee")["code"].(string)
	var rules []map[string]any
	r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{
		{"event": "order.paid", "source": map[string]any{"banner": "Hundred"}, "loyalty": map[string]any{"type": "FIXED", "points": 100}}})
	if r.Status != 200 || json.Unmarshal(r.Body, &rules) != nil {
		t.Fatalf("rule: %d %s", r.Status, r.Body)
	}
	ruleID := rules[0]["id"].(string)

	a.Fails("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "X"}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "A", "points": map[string]any{"from": 0, "to": 100}},
		{"name": "B", "points": map[string]any{"from": 100}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "A", "points": map[string]any{"from": 0},
		"earning_rules": map[string]any{"ern_nope": map[string]any{"type": "MULTIPLY", "multiplier": 2}}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "A", "points": map[string]any{"from": 0},
		"earning_rules": map[string]any{ruleID: map[string]any{"type": "MULTIPLY"}}}}, 400, "invalid_payload")
	var tiers []map[string]any
	r = a.Do("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{
		{"name": "Bronze", "points": map[string]any{"from": 100, "to": 299}},
		{"name": "Silver", "points": map[string]any{"from": 300}, "earning_rules": map[string]any{ruleID: map[string]any{"type": "MULTIPLY", "multiplier": 2}}},
	})
	if r.Status != 200 || json.Unmarshal(r.Body, &tiers) != nil || len(tiers) != 2 {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	bronze, silver := tiers[0], tiers[1]
	if !strings.HasPrefix(bronze["id"].(string), "ltr_") || bronze["object"] != "loyalty_tier" || bronze["campaign_id"] != campID ||
		bronze["points"].(map[string]any)["to"] != 299.0 || silver["points"].(map[string]any)["to"] != nil {
		t.Fatalf("tier: %v", bronze)
	}
	a.Fails("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "C", "points": map[string]any{"from": 250, "to": 260}}}, 400, "invalid_payload")
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/tiers", nil); l["total"] != 2.0 {
		t.Fatalf("tiers list: %v", l)
	}
	if g := a.OK("GET", "/v1/loyalties/"+campID+"/tiers/"+silver["id"].(string), nil); g["name"] != "Silver" {
		t.Fatalf("tier get: %v", g)
	}
	// A rule scoped to Bronze earns only for Bronze holders.
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid", "source": map[string]any{"banner": "Bronze bonus"},
		"loyalty_tier": map[string]any{"id": bronze["id"]}, "loyalty": map[string]any{"type": "FIXED", "points": 7}}}); r.Status != 200 {
		t.Fatalf("scoped rule: %d %s", r.Status, r.Body)
	}
	memberTiers := func() []any { return a.OK("GET", "/v1/loyalties/members/"+code+"/tiers", nil)["data"].([]any) }
	if n := len(memberTiers()); n != 0 {
		t.Fatalf("a card with no points is in %d tiers", n)
	}

	pay := func(src string, entries int) []map[string]any {
		a.OK("POST", "/v1/orders", map[string]any{"source_id": src, "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "dee"}})
		stacktest.Eventually(t, 10*time.Second, "accruals of "+src, func() bool { return len(a.History(code)) == entries })
		return a.History(code)
	}
	// No tier yet: 100, without tier details; the scoped rule does not earn.
	h := pay("o-1", 1)
	stacktest.CheckTx(t, h[0], "POINTS_ACCRUAL", "balance", "earning_rule", "event", "order")
	if o := ev.Wait(t, "customer.loyalty.tier.joined", 1); o["loyalty_tier"].(map[string]any)["id"] != bronze["id"] {
		t.Fatalf("joined: %v", o)
	}
	if mt := memberTiers(); len(mt) != 1 || mt[0].(map[string]any)["id"] != bronze["id"] {
		t.Fatalf("member tiers: %v", mt)
	}
	// In Bronze: both rules earn, each naming the tier.
	h = pay("o-2", 3)
	for _, tx := range h[1:] {
		stacktest.CheckTx(t, tx, "POINTS_ACCRUAL", "balance", "earning_rule", "event", "holder_loyalty_tier", "loyalty_tier", "order")
		if d := tx["details"].(map[string]any); d["holder_loyalty_tier"].(map[string]any)["id"] != bronze["id"] ||
			d["loyalty_tier"].(map[string]any)["name"] != "Bronze" {
			t.Fatalf("bronze accrual: %v", tx)
		}
	}
	// 207 points, then 100 more by hand: Silver.
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 100})
	if o := ev.Wait(t, "customer.loyalty.tier.upgraded", 1); o["loyalty_tier"].(map[string]any)["id"] != silver["id"] ||
		o["previous_loyalty_tier"].(map[string]any)["id"] != bronze["id"] {
		t.Fatalf("upgraded: %v", o)
	}
	ev.Wait(t, "customer.loyalty.tier.left", 1)
	// Silver doubles the rule's points, and the Bronze rule is out.
	h = pay("o-3", 5)
	tx := h[4]
	stacktest.CheckTx(t, tx, "POINTS_ACCRUAL", "balance", "earning_rule", "event", "holder_loyalty_tier", "loyalty_tier", "order")
	if d := tx["details"].(map[string]any); d["balance"].(map[string]any)["points"] != 200.0 ||
		d["loyalty_tier"].(map[string]any)["id"] != silver["id"] || d["earning_rule"].(map[string]any)["id"] != ruleID {
		t.Fatalf("silver accrual: %v", tx)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(a.History(code)); n != 5 {
		t.Fatalf("the Bronze rule earned for a Silver holder: %d entries", n)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["balance"] != 507.0 {
		t.Fatalf("card: %v", lc)
	}
}
