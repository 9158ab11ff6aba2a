package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func last(txs []map[string]any) map[string]any { return txs[len(txs)-1] }

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
	// Numbered pages, the reference's maximum 100.
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+code+"/points-expiration?limit=1&page=2", nil); l["has_more"] != false ||
		len(l["data"].([]any)) != 1 || l["data"].([]any)[0].(map[string]any)["expires_at"] != d20 {
		t.Fatalf("page 2: %v", l)
	}
	a.Fails("GET", "/v1/loyalties/"+campID+"/members/"+code+"/points-expiration?page=101", nil, 400, "page_over_limit")

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
