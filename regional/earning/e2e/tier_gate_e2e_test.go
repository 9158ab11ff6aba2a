package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
)

// A tier event rule with a validation rule earns in the asynchronous
// phase, once per move, for the members that meet it; the points it gives
// may move the card again, which earns nothing more. A rule without one
// still earns in the moving transaction.
func TestGatedTierEventRulesEarnLaterOnlyForMembersWhoMeetThem(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	campID := a.Campaign("Tiered VIPs", nil)["id"].(string)
	ann := a.Member(campID, "ann")["code"].(string)
	bob := a.Member(campID, "bob")["code"].(string)
	a.OK("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"vip": "yes"}})
	var ts []map[string]any
	r := a.Do("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{
		{"name": "Bronze", "points": map[string]any{"from": 100, "to": 299}},
		{"name": "Silver", "points": map[string]any{"from": 300}},
	})
	if r.Status != 200 || json.Unmarshal(r.Body, &ts) != nil || len(ts) != 2 {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	vip := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "VIPs", "rules": map[string]any{"1": map[string]any{
		"name": "customer.metadata", "property": "vip", "conditions": map[string]any{"$is": []any{"yes"}}}, "logic": "1"}})
	joined := func(pts int, extra map[string]any) map[string]any {
		b := map[string]any{"event": "customer.loyalty.tier.joined", "loyalty": map[string]any{"type": "FIXED", "points": pts},
			"loyalty_tier": map[string]any{"id": "__ANY__"}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	gated := rule(a, campID, joined(200, map[string]any{"validation_rule_id": vip["id"]}))
	if gated["validation_rule_id"] != vip["id"] {
		t.Fatalf("gated rule: %v", gated)
	}
	inline := rule(a, campID, joined(7, nil))
	balance := func(code string) float64 {
		return card(a.OK("GET", "/v1/loyalties/members/"+code, nil))["balance"].(float64)
	}

	// Both join Bronze: the ungated rule earns at once, in the move (the
	// VIP's gated 200 may already have followed, in the asynchronous
	// phase, by the time her balance is read).
	for _, code := range []string{ann, bob} {
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 150})
		if b := balance(code); b != 157 && (code != ann || b != 357) {
			t.Fatalf("%s after joining Bronze: %v, want 157 (the inline rule's 7)", code, b)
		}
	}
	// Only the VIP earns the gated rule's 200, which takes her to Silver:
	// that move earns neither rule again.
	stacktest.Eventually(t, 10*time.Second, "the VIP's gated accrual", func() bool { return balance(ann) == 357 })
	pool := e.Stack.Regional["api"].Pool()
	ctx := context.Background()
	tasks := func() (n, done int) {
		_ = pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'done') FROM outbox
			WHERE project_id = $1 AND kind = 'earning.tier_moved'`, a.P.ID).Scan(&n, &done)
		return n, done
	}
	stacktest.Eventually(t, 10*time.Second, "both members' gated tasks run", func() bool { n, done := tasks(); return n == 2 && done == 2 })
	if b := balance(bob); b != 157 {
		t.Fatalf("bob, no VIP, has %v after the gated tasks ran, want 157", b)
	}
	if got := earned(t, a, ann, 3); got[gated["id"].(string)] != 200 || got[inline["id"].(string)] != 7 {
		t.Fatalf("ann earned %v", got)
	}
	for _, tx := range a.History(ann) {
		d := tx["details"].(map[string]any)
		if r, ok := d["earning_rule"].(map[string]any); ok && r["id"] == gated["id"] {
			if d["event"].(map[string]any)["type"] != "customer.loyalty.tier.joined" || d["loyalty_tier"].(map[string]any)["id"] != ts[0]["id"] {
				t.Fatalf("gated accrual details: %v", d)
			}
		}
	}

	// The task run again (as after a crash between effect and
	// bookkeeping): the move earns nothing more.
	var payload json.RawMessage
	if err := pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE project_id = $1 AND kind = 'earning.tier_moved'
		AND payload->>'customer_id' = (SELECT id FROM customers WHERE project_id = $1 AND source_id = 'ann')`, a.P.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if _, err := async.Enqueue(ctx, pool, a.P.ID, async.NewTask{Kind: "earning.tier_moved", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "the replayed task", func() bool { n, done := tasks(); return n == 3 && done == 3 })
	if b := balance(ann); b != 357 || len(a.History(ann)) != 3 {
		t.Fatalf("a replayed gated task earned again: balance %v, %d entries", b, len(a.History(ann)))
	}
}
