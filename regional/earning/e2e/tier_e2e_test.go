package e2e_test

import (
	"encoding/json"
	"testing"
)

func TestTierEventsEarnOncePerMoveInTheTransactionThatMovedTheCard(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Tiered", nil)["id"].(string)
	other := a.Campaign("Other", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	var ts []map[string]any
	r := a.Do("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{
		{"name": "Bronze", "points": map[string]any{"from": 100, "to": 299}},
		{"name": "Silver", "points": map[string]any{"from": 300, "to": 999}},
		{"name": "Gold", "points": map[string]any{"from": 1000}},
	})
	if r.Status != 200 || json.Unmarshal(r.Body, &ts) != nil || len(ts) != 3 {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	bronze := ts[0]["id"].(string)
	var otherTiers []map[string]any
	if r := a.Do("POST", "/v1/loyalties/"+other+"/tiers", []map[string]any{{"name": "Elsewhere", "points": map[string]any{"from": 1}}}); r.Status != 200 ||
		json.Unmarshal(r.Body, &otherTiers) != nil {
		t.Fatalf("other tiers: %d %s", r.Status, r.Body)
	}
	tierRule := func(event, tier string, pts int) map[string]any {
		return map[string]any{"event": "customer.loyalty.tier." + event, "loyalty": map[string]any{"type": "FIXED", "points": pts},
			"loyalty_tier": map[string]any{"id": tier}}
	}
	path := "/v1/loyalties/" + campID + "/earning-rules"
	// What a tier rule cannot be.
	prop := tierRule("joined", "__ANY__", 1)
	prop["loyalty"] = map[string]any{"type": "PROPORTIONAL", "calculation_type": "ORDER_AMOUNT", "order": map[string]any{"amount": map[string]any{"every": 1, "points": 1}}}
	a.Fails("POST", path, []map[string]any{prop}, 400, "invalid_payload")
	a.Fails("POST", path, []map[string]any{{"event": "customer.loyalty.tier.joined", "loyalty": map[string]any{"type": "FIXED", "points": 1}}}, 400, "invalid_payload")
	a.Fails("POST", path, []map[string]any{tierRule("joined", "ltr_nope", 1)}, 404, "not_found")
	a.Fails("POST", path, []map[string]any{tierRule("joined", otherTiers[0]["id"].(string), 1)}, 404, "not_found")
	a.Fails("POST", path, []map[string]any{tierRule("renamed", "__ANY__", 1)}, 400, "invalid_payload")

	rules := map[string]map[string]any{
		"joined Bronze":     rule(a, campID, tierRule("joined", bronze, 7)),
		"joined any":        rule(a, campID, tierRule("joined", "__ANY__", 1)),
		"upgraded any":      rule(a, campID, tierRule("upgraded", "__ANY__", 10)),
		"downgraded Bronze": rule(a, campID, tierRule("downgraded", bronze, 20)),
		"left Bronze":       rule(a, campID, tierRule("left", bronze, 3)),
		"prolonged any":     rule(a, campID, tierRule("prolonged", "__ANY__", 1000)),
	}
	if rules["joined Bronze"]["loyalty_tier"].(map[string]any)["id"] != bronze || rules["joined Bronze"]["event"] != "customer.loyalty.tier.joined" {
		t.Fatalf("rule: %v", rules["joined Bronze"])
	}
	balance := func(pts int) float64 {
		t.Helper()
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": pts})
		return card(a.OK("GET", "/v1/loyalties/members/"+code, nil))["balance"].(float64)
	}
	// Into Bronze: joined (the named tier and any tier).
	if b := balance(150); b != 158 {
		t.Fatalf("after joining Bronze: %v", b)
	}
	// Within Bronze: nothing more.
	if b := balance(50); b != 208 {
		t.Fatalf("within Bronze: %v", b)
	}
	// Up to Silver: left Bronze, joined any, upgraded.
	if b := balance(100); b != 322 {
		t.Fatalf("after the upgrade: %v", b)
	}
	// Down to Bronze: joined Bronze again, and downgraded to it.
	if b := balance(-100); b != 250 {
		t.Fatalf("after the downgrade: %v", b)
	}
	// Up to Silver (990), whose points (14) reach Gold: that move earns
	// nothing more, so the card stops at 1004 rather than joining again.
	if b := balance(740); b != 1004 {
		t.Fatalf("after the chained move: %v", b)
	}
	want := map[string]float64{"joined Bronze": 14, "joined any": 4, "upgraded any": 20, "downgraded Bronze": 20, "left Bronze": 6, "prolonged any": 0}
	got := map[string]float64{}
	accruals := 0
	for _, tx := range a.History(code) {
		if tx["type"] != "POINTS_ACCRUAL" {
			continue
		}
		accruals++
		d := tx["details"].(map[string]any)
		for name, r := range rules {
			if d["earning_rule"].(map[string]any)["id"] == r["id"] {
				got[name] += d["balance"].(map[string]any)["points"].(float64)
				if d["event"].(map[string]any)["type"] != r["event"] || d["loyalty_tier"] == nil {
					t.Errorf("accrual of %s: %v", name, d)
				}
			}
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s earned %v, want %v", name, got[name], w)
		}
	}
	if accruals != 11 {
		t.Errorf("%d accruals, want 11", accruals)
	}
}
