package e2e_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
)

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func start(t *testing.T) (*stacktest.Env, stacktest.API) {
	e := stacktest.Start(t, stacktest.Options{})
	return e, stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
}

func card(m map[string]any) map[string]any { return m["loyalty_card"].(map[string]any) }

func TestPaidOrdersEarnThroughRulesAndPendingPointsActivateOnTheirDate(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	campID := a.Campaign("Earners", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)

	// Rules: bad ones are refused whole, good ones come back in the reference shape.
	a.Fails("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid",
		"loyalty": map[string]any{"type": "PROPORTIONAL"}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "customer.segment.entered",
		"loyalty": map[string]any{"type": "FIXED", "points": 5}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid",
		"loyalty": map[string]any{"type": "FIXED", "points": 5}, "pending_points": map[string]any{"period_type": "DAY", "period_value": 91}}},
		400, "invalid_payload")
	rules := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{
		{"event": "order.paid", "source": map[string]any{"banner": "Ten per order"}, "loyalty": map[string]any{"type": "FIXED", "points": 10}},
		{"event": "order.paid", "source": map[string]any{"banner": "One per euro"}, "loyalty": map[string]any{"type": "PROPORTIONAL",
			"calculation_type": "ORDER_AMOUNT", "order": map[string]any{"amount": map[string]any{"every": 100, "points": 1}}}},
	})
	var created []map[string]any
	if rules.Status != 200 || json.Unmarshal(rules.Body, &created) != nil || len(created) != 2 {
		t.Fatalf("rules: %d %s", rules.Status, rules.Body)
	}
	fixed := created[0]
	if !strings.HasPrefix(fixed["id"].(string), "ern_") || fixed["object"] != "earning_rule" || fixed["active"] != true ||
		fixed["source"].(map[string]any)["object_id"] != campID || fixed["event"] != "order.paid" {
		t.Fatalf("rule: %v", fixed)
	}
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/earning-rules", nil); l["total"] != 2.0 {
		t.Fatalf("rules list: %v", l)
	}

	// A paid order: both rules accrue, in the asynchronous phase.
	order := a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "customer": map[string]any{"source_id": "ann"},
		"items": []map[string]any{{"source_id": "sku-1", "quantity": 5, "price": 500}}})
	if order["amount"] != 2500.0 || order["total_amount"] != 2500.0 || order["object"] != "order" || order["customer_id"] == nil {
		t.Fatalf("order: %v", order)
	}
	stacktest.Eventually(t, 10*time.Second, "two accruals", func() bool { return len(a.History(code)) == 2 })
	byRule := map[string]map[string]any{}
	for _, tx := range a.History(code) {
		stacktest.CheckTx(t, tx, "POINTS_ACCRUAL", "balance", "earning_rule", "event", "order")
		d := tx["details"].(map[string]any)
		if d["order"].(map[string]any)["id"] != order["id"] || d["order"].(map[string]any)["source_id"] != "o-1" ||
			d["event"].(map[string]any)["type"] != "customer.order.paid" || tx["source_id"] != "o-1" {
			t.Fatalf("accrual: %v", tx)
		}
		byRule[d["earning_rule"].(map[string]any)["id"].(string)] = d
	}
	if b := byRule[fixed["id"].(string)]["balance"].(map[string]any); b["points"] != 10.0 {
		t.Fatalf("fixed accrual: %v", b)
	}
	if b := byRule[created[1]["id"].(string)]["balance"].(map[string]any); b["points"] != 25.0 {
		t.Fatalf("proportional accrual: %v", b)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["balance"] != 35.0 || lc["points"] != 35.0 {
		t.Fatalf("card after accruals: %v", lc)
	}

	// The task run again (a duplicate row, as after a crash between effect
	// and bookkeeping): nothing more is earned.
	pool := e.Stack.Regional["api"].Pool()
	ctx := context.Background()
	var payload json.RawMessage
	if err := pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE project_id = $1 AND kind = 'order.paid'`, a.P.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	again, err := async.Enqueue(ctx, pool, a.P.ID, async.NewTask{Kind: "order.paid", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "the replayed task", func() bool {
		var status string
		_ = pool.QueryRow(ctx, `SELECT status FROM outbox WHERE project_id = $1 AND id = $2`, a.P.ID, again).Scan(&status)
		return status == "done"
	})
	if n := len(a.History(code)); n != 2 {
		t.Fatalf("a replayed accrual task earned again: %d transactions", n)
	}

	// Disabled rules earn nothing; a pending rule holds its points for 3 days.
	for _, r := range created {
		if d := a.OK("POST", "/v1/loyalties/"+campID+"/earning-rules/"+r["id"].(string)+"/disable", nil); d["active"] != false {
			t.Fatalf("disable: %v", d)
		}
	}
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid", "source": map[string]any{"banner": "Later"},
		"loyalty": map[string]any{"type": "FIXED", "points": 50}, "pending_points": map[string]any{"period_type": "DAY", "period_value": 3}}}); r.Status != 200 {
		t.Fatalf("pending rule: %d %s", r.Status, r.Body)
	}
	// An order made first and paid later (PUT) earns when it becomes PAID.
	o2 := a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-2", "amount": 1000, "customer": map[string]any{"source_id": "ann"}})
	if o2["status"] != "CREATED" {
		t.Fatalf("order 2: %v", o2)
	}
	a.OK("PUT", "/v1/orders/o-2", map[string]any{"status": "PAID"})
	stacktest.Eventually(t, 10*time.Second, "a pending entry", func() bool { return len(a.Pending(code)) == 1 })
	p := a.Pending(code)[0]
	today := time.Now().UTC().Add(0)
	if !strings.HasPrefix(p["id"].(string), "lopp_") || p["points"] != 50.0 || p["order_id"] != o2["id"] || p["voucher_id"] == nil ||
		p["activates_at"] != today.AddDate(0, 0, 3).Format(time.DateOnly) || keys(p["details"].(map[string]any)) != "earning_rule,event,order" {
		t.Fatalf("pending entry: %v", p)
	}
	ev := p["details"].(map[string]any)["event"].(map[string]any)
	if keys(ev) != "category,created_at,entity_id,event_source,group_id,id,type" || ev["entity_id"] != o2["customer_id"] ||
		ev["type"] != "customer.order.paid" || !strings.HasPrefix(ev["group_id"].(string), "v-") {
		t.Fatalf("pending event: %v", ev)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["pending_points"] != 50.0 || lc["balance"] != 35.0 {
		t.Fatalf("card with pending points: %v", lc)
	}
	// Two days on: not yet. Three: activated by the sweep.
	e.Clock.Advance(48 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	if len(a.Pending(code)) != 1 {
		t.Fatal("pending points activated before their date")
	}
	e.Clock.Advance(24 * time.Hour)
	stacktest.Eventually(t, 10*time.Second, "activation on the date", func() bool { return len(a.Pending(code)) == 0 })
	h := a.History(code)
	act := h[len(h)-1]
	stacktest.CheckTx(t, act, "PENDING_POINTS_ACTIVATION", "balance", "pending_points")
	if d := act["details"].(map[string]any); d["pending_points"].(map[string]any)["id"] != p["id"] ||
		d["balance"].(map[string]any)["points"] != 50.0 || d["balance"].(map[string]any)["balance"] != 85.0 {
		t.Fatalf("activation: %v", act)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["pending_points"] != 0.0 || lc["balance"] != 85.0 {
		t.Fatalf("card after activation: %v", lc)
	}

	// Canceled: never activates. Adjusted, then activated by hand.
	pay := func(src string) map[string]any {
		a.OK("POST", "/v1/orders", map[string]any{"source_id": src, "status": "PAID", "amount": 100, "customer": map[string]any{"source_id": "ann"}})
		var entry map[string]any
		stacktest.Eventually(t, 10*time.Second, "pending entry of "+src, func() bool {
			ps := a.Pending(code)
			if len(ps) == 1 {
				entry = ps[0]
			}
			return entry != nil
		})
		return entry
	}
	c := pay("o-3")
	if r := a.Do("POST", "/v1/loyalties/members/"+code+"/pending-points/"+c["id"].(string)+"/cancel", nil); r.Status != 204 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/pending-points/"+c["id"].(string)+"/activate", nil, 404, "not_found")
	e.Clock.Advance(5 * 24 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	if n := len(a.History(code)); n != 3 {
		t.Fatalf("a canceled entry activated: %d transactions", n)
	}
	m := pay("o-4")
	adj := a.OK("POST", "/v1/loyalties/members/"+code+"/pending-points/"+m["id"].(string)+"/balance", map[string]any{"points": 5})
	if adj["points"] != 5.0 || adj["total"] != 55.0 || adj["object"] != "balance" {
		t.Fatalf("adjust: %v", adj)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/pending-points/"+m["id"].(string)+"/balance", map[string]any{"points": -55}, 400, "invalid_payload")
	bal := a.OK("POST", "/v1/loyalties/members/"+code+"/pending-points/"+m["id"].(string)+"/activate", nil)
	if bal["points"] != 55.0 || bal["balance"] != 140.0 || bal["object"] != "balance" {
		t.Fatalf("activate by hand: %v", bal)
	}
	if lc := card(a.OK("GET", "/v1/loyalties/members/"+code, nil)); lc["pending_points"] != 0.0 || lc["balance"] != 140.0 {
		t.Fatalf("card at the end: %v", lc)
	}
	// Orders read back.
	if l := a.OK("GET", "/v1/orders?limit=2", nil); l["total"] != 4.0 || len(l["orders"].([]any)) != 2 || l["has_more"] != true {
		t.Fatalf("orders list: %v", l)
	}
	if g := a.OK("GET", "/v1/orders/o-2", nil); g["status"] != "PAID" || g["id"] != o2["id"] {
		t.Fatalf("order by source id: %v", g)
	}
	a.Fails("POST", "/v1/orders", map[string]any{"status": "SHIPPED"}, 400, "invalid_payload")

	// Deleting the campaign takes its rules and pending entries with it.
	pay("o-5")
	del := a.OK("DELETE", "/v1/loyalties/"+campID, nil)
	a.WaitAction(del["async_action_id"].(string))
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM loyalty_pending_points WHERE project_id = $1)
		+ (SELECT count(*) FROM earning_rules WHERE project_id = $1)`, a.P.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d pending entries and rules outlived their campaign", left)
	}
	a.Fails("GET", "/v1/orders/nope", nil, 404, "not_found")
}

// Orders are written READ COMMITTED with row locks: requests racing to
// create one order, and its new customer, all succeed on one order and one
// customer, and requests racing to pay an order raise one order.paid.
func TestRacingOrderWritesMakeOneOrderAndOnePayment(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	e, a := start(t)
	pool := e.Stack.Regional["api"].Pool()
	ctx := context.Background()
	race := func(n int, method, path string, body map[string]any) []string {
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := a.Do(method, path, body)
				var o map[string]any
				if r.Status != 200 || json.Unmarshal(r.Body, &o) != nil {
					t.Errorf("%s %s: %d %s", method, path, r.Status, r.Body)
					return
				}
				ids[i] = o["id"].(string)
			}()
		}
		wg.Wait()
		return ids
	}
	count := func(sql string, args ...any) int {
		var n int
		if err := pool.QueryRow(ctx, sql, append([]any{a.P.ID}, args...)...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	paidTasks := func(orderID string) int {
		return count(`SELECT count(*) FROM outbox WHERE project_id = $1 AND kind = 'order.paid' AND payload->>'order_id' = $2`, orderID)
	}

	ids := race(8, "POST", "/v1/orders", map[string]any{"source_id": "race-1", "status": "PAID", "amount": 1000,
		"customer": map[string]any{"source_id": "racer"}})
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("one source_id, several orders: %v", ids)
		}
	}
	if n := count(`SELECT count(*) FROM orders WHERE project_id = $1 AND source_id = 'race-1'`); n != 1 {
		t.Fatalf("%d orders", n)
	}
	if n := count(`SELECT count(*) FROM customers WHERE project_id = $1 AND source_id = 'racer'`); n != 1 {
		t.Fatalf("%d customers", n)
	}
	if n := paidTasks(ids[0]); n != 1 {
		t.Fatalf("%d order.paid tasks for one payment", n)
	}

	created := a.OK("POST", "/v1/orders", map[string]any{"source_id": "race-2", "amount": 1000, "customer": map[string]any{"source_id": "racer"}})
	race(8, "PUT", "/v1/orders/race-2", map[string]any{"status": "PAID"})
	if n := paidTasks(created["id"].(string)); n != 1 {
		t.Fatalf("%d order.paid tasks after racing payments", n)
	}
}
