package e2e_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// api is a project's client of one cluster, with the loyalty program's
// helpers (stacktest's).
type api struct{ stacktest.API }

func start(t *testing.T) (*stacktest.Env, api) {
	e := stacktest.Start(t, stacktest.Options{})
	return e, api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
}

func card(m map[string]any) map[string]any { return m["loyalty_card"].(map[string]any) }

func last(txs []map[string]any) map[string]any { return txs[len(txs)-1] }

func TestRewardsAreRedeemedWithPointsAndRolledBack(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	ev := a.Subscribe("redemption.succeeded", "redemption.rollback.succeeded")
	campID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})

	// The rewards (what they accept and how they read back are tested in
	// regional/rewards): one with a stock of two, one paying with points,
	// one the card cannot afford and one no campaign offers.
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
	if u := a.OK("PUT", "/v1/rewards/"+mugID, map[string]any{"name": "Blue mug"}); u["name"] != "Blue mug" || u["stock"] != 2.0 || u["updated_at"] == nil {
		t.Fatalf("reward update: %v", u)
	}

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

func TestWhatARewardAssignmentAccepts(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Offers", nil)["id"].(string)
	other := a.Campaign("Elsewhere", nil)["id"].(string)
	reward := func(name string, params map[string]any) string {
		return a.OK("POST", "/v1/rewards", map[string]any{"name": name, "parameters": params})["id"].(string)
	}
	mug := reward("Mug", map[string]any{"product": map[string]any{"id": "prod_mug"}})
	capID := reward("Cap", map[string]any{"product": map[string]any{"id": "prod_cap"}})
	coin := reward("Pay with points", map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}})
	priced := func(id string, points any) map[string]any {
		return map[string]any{"reward": id, "parameters": map[string]any{"loyalty": map[string]any{"points": points}}}
	}
	path := "/v1/loyalties/" + campID + "/rewards"

	for _, c := range []struct {
		name   string
		body   any
		status int
		key    string
	}{
		{"a material reward without a price", map[string]any{"reward": mug}, 400, "invalid_payload"},
		{"a material reward for no points", priced(mug, 0), 400, "invalid_payload"},
		{"a material reward past a billion points", priced(mug, 1_000_000_001), 400, "invalid_payload"},
		{"a fractional price", priced(mug, 1.5), 400, "invalid_payload"},
		{"a COIN reward with a price", priced(coin, 5), 400, "invalid_payload"},
		{"no reward", map[string]any{"parameters": map[string]any{"loyalty": map[string]any{"points": 5}}}, 400, "invalid_payload"},
		{"a reward that is not there", priced("rew_nope", 5), 404, "not_found"},
		{"an empty list", []any{}, 400, "invalid_payload"},
		{"a list with one bad item: none is made", []any{priced(capID, 5), priced(mug, 0)}, 400, "invalid_payload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stacktest.API{T: t, E: a.E, P: a.P}.Fails("POST", path, c.body, c.status, c.key)
		})
	}
	if l := a.OK("GET", path, nil); l["total"] != 0.0 {
		t.Fatalf("refused assignments were made: %v", l)
	}
	a.Fails("POST", "/v1/loyalties/camp_nope/rewards", priced(mug, 5), 404, "not_found")

	// The reference's body is a list, answered with the assignment it made;
	// a list of several makes all and is answered with the first item's
	// assignment, one RewardAssignment as the reference's schema types the
	// answer (every answer here is checked against it), the others read
	// back from the list. One reward once a campaign.
	mugAs := a.OK("POST", path, []any{priced(mug, 100)})
	if mugAs["object"] != "reward_assignment" || mugAs["reward_id"] != mug || mugAs["related_object_id"] != campID {
		t.Fatalf("assignment made from a list of one: %v", mugAs)
	}
	hat := reward("Hat", map[string]any{"product": map[string]any{"id": "prod_hat"}})
	two := a.OK("POST", path, []any{priced(capID, 30), priced(hat, 40)})
	if two["object"] != "reward_assignment" || two["reward_id"] != capID || two["related_object_id"] != campID ||
		two["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 30.0 {
		t.Fatalf("assignments made from a list of two: %v, want the first item's assignment", two)
	}
	made := map[string]float64{}
	for _, x := range a.OK("GET", path+"?limit=100", nil)["data"].([]any) {
		as := x.(map[string]any)
		made[as["reward_id"].(string)] = as["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"].(float64)
	}
	if len(made) != 3 || made[capID] != 30 || made[hat] != 40 {
		t.Fatalf("the campaign's assignments after a list of two: %v", made)
	}
	a.OK("POST", path, map[string]any{"reward": coin})
	a.Fails("POST", path, priced(mug, 5), 409, "duplicate_found")
	if as := a.OK("POST", "/v1/loyalties/"+other+"/rewards", priced(mug, 7)); as["related_object_id"] != other {
		t.Fatalf("the same reward in another campaign: %v", as)
	}

	// An update changes the price, under the same rules; another campaign's
	// path does not reach the assignment.
	at := path + "/" + mugAs["id"].(string)
	if u := a.OK("PUT", at, map[string]any{"parameters": map[string]any{"loyalty": map[string]any{"points": 80}}}); u["updated_at"] == nil ||
		u["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 80.0 {
		t.Fatalf("update: %v", u)
	}
	a.Fails("PUT", at, map[string]any{"parameters": map[string]any{"loyalty": map[string]any{"points": 0}}}, 400, "invalid_payload")
	a.Fails("PUT", at, map[string]any{}, 400, "invalid_payload")
	a.Fails("GET", "/v1/loyalties/"+other+"/rewards/"+mugAs["id"].(string), nil, 404, "not_found")
	a.Fails("DELETE", "/v1/loyalties/"+other+"/rewards/"+mugAs["id"].(string), nil, 404, "not_found")
	if g := a.OK("GET", at, nil); g["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 80.0 {
		t.Fatalf("after refused updates: %v", g)
	}

	// Withdrawn, the reward is no longer offered.
	if r := a.Do("DELETE", at, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", at, nil, 404, "not_found")
	code := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mug}}, 400, "reward_not_assigned")
	if l := a.OK("GET", path, nil); l["total"] != 3.0 {
		t.Fatalf("assignments after a withdrawal: %v", l)
	}
}
