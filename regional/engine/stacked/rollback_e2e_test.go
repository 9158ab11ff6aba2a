package stacked_test

import (
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// lockAPI is a project on a platform whose "api" cluster has a database
// server of its own, so that the server's log holds only this test's
// deadlocks.
func lockAPI(t *testing.T) (stacktest.API, func() int) {
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"api"}})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	return a, func() int { return e.Servers["api"].Deadlocks(t) }
}

// The reproducer of issue 32: 30 rollbacks at once, 15 of each child of
// one stacked redemption (a discount voucher and gift credits). The
// child's rollback locked the child before its parent's family, so two
// siblings locked in opposite orders: each pair deadlocked (a second of
// detection, then a retry), 30 at once piled up for a minute and starved
// the cluster. Now every answer comes within 5 s, exactly one rollback of
// each child succeeds, and the database detects no deadlock.
func TestThirtyRollbacksOfOneStacksChildrenAnswerAtOnce(t *testing.T) {
	t.Parallel()
	a, deadlocks := lockAPI(t)
	a.Voucher("TEN", stacktest.PercentOff(10))
	a.Voucher("GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 100000}})
	r := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "TEN"}, map[string]any{"object": "voucher", "id": "GIFT"}}, "order": stacktest.Order([2]int{10000, 1})})
	kids := r["redemptions"].([]any)
	c1, c2 := kids[0].(map[string]any)["id"].(string), kids[1].(map[string]any)["id"].(string)
	var reqs []func() stacktest.Resp
	for i := range 30 {
		id := []string{c1, c2}[i%2]
		reqs = append(reqs, func() stacktest.Resp { return a.Do("POST", "/v1/redemptions/"+id+"/rollback", map[string]any{}) })
	}
	ok := map[int]int{}
	for i, x := range stacktest.Concurrently(a, reqs) {
		if x.Elapsed > 5*time.Second {
			t.Errorf("rollback %d answered after %v", i, x.Elapsed)
		}
		switch {
		case x.Status == 200:
			ok[i%2]++
		case x.Status == 400 && x.Key == "already_rolled_back":
		default:
			t.Errorf("rollback %d: %d %s", i, x.Status, x.Key)
		}
	}
	if ok[0] != 1 || ok[1] != 1 {
		t.Fatalf("successful rollbacks per child: %v, want one each", ok)
	}
	if g := a.OK("GET", "/v1/vouchers/GIFT", nil); stacktest.Num(g["gift"].(map[string]any)["balance"]) != 100000 {
		t.Fatalf("gift balance after the rollback: %v", g["gift"])
	}
	if v := a.OK("GET", "/v1/vouchers/TEN", nil); stacktest.Num(v["redemption"].(map[string]any)["redeemed_quantity"]) != 0 {
		t.Fatalf("TEN after the rollback: %v", v["redemption"])
	}
	if p := a.OK("GET", "/v1/redemptions/"+r["parent_redemption"].(map[string]any)["id"].(string), nil); p["status"] != "ROLLED_BACK" {
		t.Fatalf("parent after both children's rollbacks: %v", p["status"])
	}
	if n := deadlocks(); n != 0 {
		t.Fatalf("the database detected %d deadlocks", n)
	}
}
