package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// lockAPI is a project on a platform whose "api" cluster has a database
// server of its own, so that the server's log holds only this test's
// deadlocks.
func lockAPI(t *testing.T) (stacktest.API, func() int) {
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"api"}})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	return a, func() int { return e.Servers["api"].Deadlocks(t) }
}

// Every pair of writers that lock more than one row of a family, at once
// on the same objects: stacked redemptions naming the same vouchers, gift
// card and loyalty card in other orders (by code and by id), rollbacks of
// whole stacks and of their children, balance changes of the gift card
// and the loyalty card, publications of a campaign's vouchers and deletes
// of them. None may deadlock (the database log says), none may fail with
// a server error, and the counts must add up afterwards.
func TestLockOrderHoldsForEveryPairOfWriters(t *testing.T) {
	t.Parallel()
	a, deadlocks := lockAPI(t)
	a.Voucher("LO-A", stacktest.PercentOff(5))
	a.Voucher("LO-B", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 10}})
	gift := a.Voucher("LO-GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 10_000_000}})
	aID := a.OK("GET", "/v1/vouchers/LO-A", nil)["id"].(string)
	campID := a.Campaign("Lockers", nil)["id"].(string)
	member := a.Member(campID, "lo-ann")
	card, cardID := member["code"].(string), member["id"].(string)
	a.OK("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 1_000_000})
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Coins",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": coin})
	pub := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Handouts", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"vouchers_count": 40, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 1}}})
	pubID := pub["id"].(string)
	var handouts []string
	stacktest.Eventually(t, 20*time.Second, "the campaign's vouchers", func() bool {
		l := a.OK("GET", "/v1/vouchers?campaign_id="+pubID+"&limit=100", nil)["vouchers"].([]any)
		handouts = handouts[:0]
		for _, v := range l {
			handouts = append(handouts, v.(map[string]any)["code"].(string))
		}
		return len(handouts) == 40
	})
	_ = gift

	byCode := func(code string) map[string]any { return map[string]any{"object": "voucher", "id": code} }
	pay := map[string]any{"object": "voucher", "id": card, "reward": map[string]any{"id": coin, "points": 10}}
	payByID := map[string]any{"object": "voucher", "id": cardID, "reward": map[string]any{"id": coin, "points": 10}}
	stacks := [][]any{
		{byCode("LO-A"), byCode("LO-B"), byCode("LO-GIFT"), pay},
		{byCode("LO-GIFT"), byCode("LO-B"), map[string]any{"object": "voucher", "id": aID}, payByID},
		{pay, byCode("LO-GIFT"), byCode("LO-A")},
	}
	redeem := func(i int) stacktest.Resp {
		return a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": stacks[i%len(stacks)], "order": stacktest.Order([2]int{100000, 1})})
	}
	// Stacks to roll back while others are redeemed.
	type stack struct{ parent, kid string }
	var made []stack
	for i := range 12 {
		r := redeem(i)
		if r.Status != 200 {
			t.Fatalf("redemption %d: %d %s", i, r.Status, r.Body)
		}
		m := r.JSON(t)
		made = append(made, stack{m["parent_redemption"].(map[string]any)["id"].(string),
			m["redemptions"].([]any)[i%3].(map[string]any)["id"].(string)})
	}
	var reqs []func() stacktest.Resp
	for i := range 12 {
		s := made[i]
		reqs = append(reqs,
			func() stacktest.Resp { return redeem(i) },
			func() stacktest.Resp { return a.Do("POST", "/v1/redemptions/"+s.kid+"/rollback", map[string]any{}) },
			func() stacktest.Resp { return a.Do("POST", "/v1/redemptions/"+s.parent+"/rollbacks", map[string]any{}) },
			func() stacktest.Resp {
				return a.Do("POST", "/v1/vouchers/LO-GIFT/balance", map[string]any{"amount": 100, "reason": "top-up"})
			},
			func() stacktest.Resp {
				return a.Do("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 10})
			},
			func() stacktest.Resp {
				return a.Do("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Handouts"},
					"customer": map[string]any{"source_id": fmt.Sprintf("lo-%d", i)}})
			},
			func() stacktest.Resp { return a.Do("DELETE", "/v1/vouchers/"+handouts[i], nil) },
		)
	}
	var standing []string
	for i, x := range stacktest.Concurrently(a, reqs) {
		switch {
		case x.Status >= 500 || x.Status == 0:
			t.Errorf("request %d (kind %d): %d %s after %v", i, i%7, x.Status, x.Key, x.Elapsed)
		case i%7 == 0 && x.Status == 200:
			standing = append(standing, x.Body["parent_redemption"].(map[string]any)["id"].(string))
		case (i%7 == 1 || i%7 == 2) && x.Status == 400 && x.Key == "already_rolled_back":
		case x.Status != 200 && x.Status != 204 && !(i%7 == 5 && x.Key == "no_voucher_suitable_for_publication"):
			t.Errorf("request %d (kind %d): %d %s", i, i%7, x.Status, x.Key)
		}
	}
	// Every stack made first is rolled back whole; those made meanwhile
	// stand, and LO-A (in every stack) counts exactly them.
	for _, s := range made {
		if p := a.OK("GET", "/v1/redemptions/"+s.parent, nil); p["status"] != "ROLLED_BACK" {
			t.Errorf("stack %s after its rollbacks: %v", s.parent, p["status"])
		}
	}
	for _, id := range standing {
		if p := a.OK("GET", "/v1/redemptions/"+id, nil); p["status"] != "SUCCEEDED" {
			t.Errorf("stack %s redeemed meanwhile: %v", id, p["status"])
		}
	}
	if got := stacktest.Num(a.OK("GET", "/v1/vouchers/LO-A", nil)["redemption"].(map[string]any)["redeemed_quantity"]); got != int64(len(standing)) {
		t.Errorf("LO-A redeemed %d times, want %d (the stacks standing)", got, len(standing))
	}
	if n := deadlocks(); n != 0 {
		t.Fatalf("the database detected %d deadlocks", n)
	}
}
