package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A member's activity shows every change of the card's points as the
// reference's member activity: earning from a paid order, an addition, a
// removal, a transfer both ways, a reward redemption and its rollback;
// paged by the cursor in both orders, in both path forms, and 404 for a
// card the path does not hold.
func TestMemberActivityFollowsEveryChangeOfTheCard(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Active", nil)["id"].(string)
	otherID := a.Campaign("Elsewhere", nil)["id"].(string)
	code := a.Member(campID, "eve")["code"].(string)
	friend := a.Member(campID, "fay")["code"].(string)
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{
		{"event": "order.paid", "source": map[string]any{"banner": "Ten"}, "loyalty": map[string]any{"type": "FIXED", "points": 10}}}); r.Status != 200 {
		t.Fatalf("rule: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "Silver", "points": map[string]any{"from": 100}}}); r.Status != 200 {
		t.Fatalf("tier: %d %s", r.Status, r.Body)
	}
	path := "/v1/loyalties/members/" + code + "/activity"
	if l := a.OK("GET", path, nil); l["object"] != "list" || l["data_ref"] != "data" || len(l["data"].([]any)) != 1 ||
		l["data"].([]any)[0].(map[string]any)["type"] != "customer.publication.succeeded" || l["has_more"] != false {
		t.Fatalf("a new card's activity is its publication: %v", l)
	}

	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "eve"}})
	stacktest.Eventually(t, 10*time.Second, "the accrual", func() bool { return len(a.History(code)) == 1 })
	a.OK("POST", path[:len(path)-len("/activity")]+"/balance", map[string]any{"points": 200, "reason": "welcome"})
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": -5, "reason": "fix"})
	a.OK("POST", "/v1/loyalties/"+campID+"/members/"+friend+"/transfers", []map[string]any{{"code": code, "points": 20}})
	a.OK("POST", "/v1/loyalties/members/"+friend+"/balance", map[string]any{"points": 30})
	a.OK("POST", "/v1/loyalties/"+campID+"/members/"+code+"/transfers", []map[string]any{{"code": friend, "points": 7}})
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": mug["id"], "parameters": map[string]any{"loyalty": map[string]any{"points": 50}}})
	red := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mug["id"]}})
	a.OK("POST", "/v1/redemptions/"+red["id"].(string)+"/rollback", nil)

	// Pending points of a second program's rule: added, changed, cancelled.
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid", "source": map[string]any{"banner": "Later"},
		"loyalty": map[string]any{"type": "FIXED", "points": 3}, "pending_points": map[string]any{"period_type": "DAY", "period_value": 5}}}); r.Status != 200 {
		t.Fatalf("pending rule: %d %s", r.Status, r.Body)
	}
	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-2", "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "eve"}})
	var pendingID string
	stacktest.Eventually(t, 10*time.Second, "the pending points", func() bool {
		d := a.OK("GET", "/v1/loyalties/members/"+code+"/pending-points", nil)["data"].([]any)
		if len(d) == 1 {
			pendingID = d[0].(map[string]any)["id"].(string)
		}
		return len(d) == 1 && len(a.History(code)) == 8
	})
	a.OK("POST", "/v1/loyalties/members/"+code+"/pending-points/"+pendingID+"/balance", map[string]any{"points": 2})
	if r := a.Do("POST", "/v1/loyalties/members/"+code+"/pending-points/"+pendingID+"/cancel", nil); r.Status != 204 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}

	want := []string{ // newest first
		"customer.voucher.loyalty_card.pending_points.canceled",
		"customer.voucher.loyalty_card.pending_points.updated",
		"customer.voucher.loyalty_card.pending_points.added",
		"customer.rewarded.loyalty_points", // o-2's ten
		"customer.reward_redemptions.rolledback",
		"customer.reward_redemptions.created",
		"customer.voucher.loyalty_card.points_transferred", // 7 in from fay
		"customer.voucher.loyalty_card.points_transferred", // 20 out to fay
		"customer.voucher.loyalty_card.points_added",       // -5
		"customer.loyalty.tier.joined",                     // 210
		"customer.voucher.loyalty_card.points_added",       // 200
		"customer.rewarded.loyalty_points",
		"customer.publication.succeeded",
	}
	all := a.OK("GET", path+"?limit=100", nil)
	data := all["data"].([]any)
	if len(data) != len(want) {
		t.Fatalf("activity: %d entries, want %d: %v", len(data), len(want), all)
	}
	txs := a.OK("GET", "/v1/loyalties/members/"+code+"/transactions?order=-id&limit=100", nil)["data"].([]any)
	entry := 0 // the ledger entries, in the same order
	for i, d := range data {
		act := d.(map[string]any)
		if act["type"] != want[i] {
			t.Fatalf("entry %d is %v, want %s", i, act["type"], want[i])
		}
		inner := act["data"].(map[string]any)["data"].(map[string]any)
		if inner["voucher"].(map[string]any)["code"] != code || inner["campaign"].(map[string]any)["id"] != campID ||
			inner["customer"].(map[string]any)["id"] == nil {
			t.Fatalf("entry %d does not name its card: %v", i, act)
		}
		tx, isEntry := inner["transaction"].(map[string]any)
		if !isEntry {
			continue
		}
		if act["id"] != txs[entry].(map[string]any)["id"] || tx["id"] != act["id"] {
			t.Fatalf("entry %d does not name its card's transaction %v: %v", i, txs[entry], act)
		}
		entry++
	}
	if entry != len(txs) {
		t.Fatalf("%d of the card's %d transactions are in its activity", entry, len(txs))
	}
	byType := func(typ string) map[string]any {
		for _, d := range data {
			if d.(map[string]any)["type"] == typ {
				return d.(map[string]any)["data"].(map[string]any)["data"].(map[string]any)
			}
		}
		return nil
	}
	if tier := byType("customer.loyalty.tier.joined")["loyalty_tier"].(map[string]any); tier["name"] != "Silver" {
		t.Fatalf("the tier joined: %v", tier)
	}
	if p := byType("customer.voucher.loyalty_card.pending_points.updated")["pending_points"].(map[string]any); p["id"] != pendingID || p["points"] != 5.0 {
		t.Fatalf("the pending points updated: %v", p)
	}
	first := data[len(data)-2].(map[string]any)
	if src := first["data"].(map[string]any)["event_source"].(map[string]any)["channel"]; src != "INTERNAL" {
		t.Fatalf("an accrual's source: %v", src)
	}
	if b := data[len(data)-5].(map[string]any)["data"].(map[string]any)["data"].(map[string]any)["balance"].(map[string]any); b["balance"] != 205.0 {
		t.Fatalf("the removal's balance: %v", b)
	}

	// Pages of 3 by the cursor, in both orders, give the same entries.
	for _, order := range []string{"-created_at", "created_at"} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatalf("%s: no end to the pages", order)
			}
			l := a.OK("GET", path+"?limit=3&order="+order+"&starting_after_id="+after, nil)
			for _, d := range l["data"].([]any) {
				got = append(got, d.(map[string]any)["id"].(string))
			}
			if l["has_more"] != true {
				if l["more_starting_after"] != nil {
					t.Fatalf("the last page names a cursor: %v", l)
				}
				break
			}
			after = l["more_starting_after"].(string)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: paged %d entries, want %d", order, len(got), len(want))
		}
		for i := range got {
			j := i
			if order == "created_at" {
				j = len(got) - 1 - i
			}
			if got[i] != data[j].(map[string]any)["id"] {
				t.Fatalf("%s: entry %d is %s", order, i, got[i])
			}
		}
	}

	// The campaign's form is the same list; another campaign's path or an
	// unknown card is a 404, and a filter the reference does not give this
	// list is refused by name.
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+code+"/activity?limit=100", nil); len(l["data"].([]any)) != len(want) {
		t.Fatalf("the campaign's form: %v", l)
	}
	a.Fails("GET", "/v1/loyalties/"+otherID+"/members/"+code+"/activity", nil, 404, "not_found")
	a.Fails("GET", "/v1/loyalties/members/LC-NOPE00/activity", nil, 404, "not_found")
	a.Fails("GET", "/v1/loyalties/camp_nope/members/"+code+"/activity", nil, 404, "not_found")
	for _, q := range []string{"limit=0", "limit=101", "order=id", "type=customer.rewarded", "page=2", "starting_after_id=vtx_nope", "starting_after_id=evt_nope"} {
		r := a.Do("GET", path+"?"+q, nil)
		var e map[string]any
		if r.Status != 400 || json.Unmarshal(r.Body, &e) != nil || e["key"] != "invalid_query_params" {
			t.Fatalf("%s: %d %s", q, r.Status, r.Body)
		}
	}
}
