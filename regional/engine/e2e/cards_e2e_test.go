package e2e_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A loyalty card pays with a reward of its campaign inside stacked
// validations and redemptions: a COIN reward pays what the order still
// costs after the redeemables before it, a material reward takes its
// price; the points leave the card's buckets in the redemption's
// transaction (or not at all when another redeemable fails) and come back
// with its rollback; a reward's stock holds.
func TestLoyaltyCardsPayWithRewardsInStacks(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Spenders", nil)["id"].(string)
	member := a.Member(campID, "ann")
	code, cardID := member["code"].(string), member["id"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
	// 10 points are worth 1.00: a cent is 0.1 point.
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}})["id"].(string)
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "stock": 1,
		"parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})["id"].(string)
	lone := a.OK("POST", "/v1/rewards", map[string]any{"name": "Unoffered",
		"parameters": map[string]any{"product": map[string]any{"id": "prod_x"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": coin})
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": mug, "parameters": map[string]any{"loyalty": map[string]any{"points": 300}}})
	a.Voucher("TEN", stacktest.PercentOff(10))
	a.Voucher("USED", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "redemption": map[string]any{"quantity": 1}})
	a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("USED"), "order": stacktest.Order([2]int{1000, 1})})
	card := func(reward string, points ...int) map[string]any {
		r := map[string]any{"id": reward}
		if len(points) > 0 {
			r["points"] = points[0]
		}
		return map[string]any{"object": "voucher", "id": code, "reward": r}
	}
	ten := map[string]any{"object": "voucher", "id": "TEN"}
	balance := func() int64 {
		t.Helper()
		return stacktest.Num(a.OK("GET", "/v1/loyalties/members/"+code, nil)["loyalty_card"].(map[string]any)["balance"])
	}
	result := func(v map[string]any, i int) map[string]any {
		t.Helper()
		return v["redeemables"].([]any)[i].(map[string]any)
	}
	refusal := func(v map[string]any, i int) any {
		t.Helper()
		r := result(v, i)
		if r["status"] != "INAPPLICABLE" {
			return r["status"]
		}
		return r["result"].(map[string]any)["error"].(map[string]any)["key"]
	}

	// Validation: 5000 less 10 % leaves 4500, which 450 points pay whole;
	// asked for 200 points, they pay 2000.
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{ten, card(coin)}, "order": stacktest.Order([2]int{5000, 1})})
	if o := v["order"].(map[string]any); v["valid"] != true || stacktest.Num(o["total_amount"]) != 0 || stacktest.Num(o["total_discount_amount"]) != 5000 ||
		stacktest.Num(result(v, 1)["result"].(map[string]any)["loyalty_card"].(map[string]any)["points"]) != 450 {
		t.Fatalf("validation paying with points: %v", v)
	}
	v = a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{ten, card(coin, 200)}, "order": stacktest.Order([2]int{5000, 1})})
	if o := v["order"].(map[string]any); v["valid"] != true || stacktest.Num(o["total_amount"]) != 2500 ||
		stacktest.Num(result(v, 1)["result"].(map[string]any)["loyalty_card"].(map[string]any)["points"]) != 200 {
		t.Fatalf("validation paying 200 points: %v", v)
	}
	// What cannot pay is inapplicable, saying why.
	for what, c := range map[string]struct {
		r   map[string]any
		key string
	}{
		"no reward":           {map[string]any{"object": "voucher", "id": code}, "missing_reward"},
		"no reward, by v_ id": {map[string]any{"object": "voucher", "id": cardID}, "missing_reward"},
		"an unoffered one":    {card(lone), "reward_not_assigned"},
		"an unknown one":      {card("rew_nothing"), "not_found"},
		"more than it holds":  {card(coin, 1001), "loyalty_card_points_exceeded"},
		"points of a price":   {card(mug, 10), "invalid_payload"},
		"an unknown card":     {map[string]any{"object": "voucher", "id": "LC-NOTHING", "reward": map[string]any{"id": coin}}, "not_found"},
	} {
		v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{c.r}, "order": stacktest.Order([2]int{5000, 1})})
		if v["valid"] != false || refusal(v, 0) != c.key {
			t.Fatalf("%s: %v", what, v)
		}
	}
	a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": "promo_x",
		"reward": map[string]any{"id": coin}}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code,
		"reward": map[string]any{}}}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{card(coin, 0)}}, 400, "invalid_payload")
	// One card by its code and by its id is one redeemable named twice.
	byID := card(coin)
	byID["id"] = cardID
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": []any{card(coin, 100), byID}, "order": stacktest.Order([2]int{5000, 1})},
		400, "invalid_payload")
	// Two cards paying for one reward take no more than its stock: the
	// mug has one unit, so bob's card is refused beside ann's.
	bobCode := a.Member(campID, "bob")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+bobCode+"/balance", map[string]any{"points": 1000})
	bobs := card(mug)
	bobs["id"] = bobCode
	v = a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{card(mug), bobs}})
	if v["valid"] != false || refusal(v, 0) != "SKIPPED" || refusal(v, 1) != "quantity_exceeded" {
		t.Fatalf("two cards for one unit: %v", v)
	}
	if b := balance(); b != 1000 {
		t.Fatalf("validations took points: %d", b)
	}

	// Redemption: TEN and 200 points; then the mug's 300 on its own.
	r := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{ten, card(coin, 200)},
		"order": map[string]any{"source_id": "ord-c1", "items": stacktest.Order([2]int{5000, 1})["items"]}, "customer": map[string]any{"source_id": "ann"}})
	paid := r["redemptions"].([]any)[1].(map[string]any)
	if stacktest.Num(paid["amount"]) != 2000 || stacktest.Num(paid["loyalty_card"].(map[string]any)["points"]) != 200 || paid["reward"].(map[string]any)["id"] != coin ||
		stacktest.Num(paid["voucher"].(map[string]any)["loyalty_card"].(map[string]any)["balance"]) != 800 ||
		stacktest.Num(r["order"].(map[string]any)["total_amount"]) != 2500 {
		t.Fatalf("redemption paying with points: %v", r)
	}
	if b := balance(); b != 800 {
		t.Fatalf("balance after paying 200: %d", b)
	}
	tx := a.History(code)
	stacktest.CheckTx(t, tx[len(tx)-1], "POINTS_REDEMPTION", "balance", "order", "redemption", "reward")
	if d := tx[len(tx)-1]["details"].(map[string]any); d["redemption"].(map[string]any)["id"] != paid["id"] ||
		stacktest.Num(d["balance"].(map[string]any)["points"]) != -200 || d["order"].(map[string]any)["source_id"] != "ord-c1" {
		t.Fatalf("the entry: %v", tx[len(tx)-1])
	}
	m := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{card(mug)}})
	mugKid := m["redemptions"].([]any)[0].(map[string]any)
	if stacktest.Num(mugKid["loyalty_card"].(map[string]any)["points"]) != 300 || stacktest.Num(mugKid["amount"]) != 0 || balance() != 500 {
		t.Fatalf("the mug: %v", m)
	}
	if w := a.OK("GET", "/v1/rewards/"+mug, nil); stacktest.Num(w["redeemed"]) != 1 {
		t.Fatalf("the mug's stock: %v", w)
	}
	// The mug is out of stock: a FAILURE redemption, nothing taken.
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": []any{card(mug)}}, 400, "quantity_exceeded")
	// A stack whose other redeemable fails takes no points.
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": []any{card(coin, 100), map[string]any{"object": "voucher", "id": "USED"}},
		"order": stacktest.Order([2]int{5000, 1})}, 400, "quantity_exceeded")
	if b := balance(); b != 500 {
		t.Fatalf("balance after refused redemptions: %d", b)
	}
	// One child refused alone, two in the stack.
	if l := a.OK("GET", "/v1/redemptions?result=FAILURE", nil); stacktest.Num(l["total"]) != 3 {
		t.Fatalf("failures: %v", l)
	}

	// Rollbacks give the points back, and the mug's unit; once.
	rb := a.OK("POST", "/v1/redemptions/"+r["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	if len(rb["rollbacks"].([]any)) != 2 || balance() != 700 {
		t.Fatalf("rollback of the stack: %v", rb)
	}
	tx = a.History(code)
	stacktest.CheckTx(t, tx[len(tx)-1], "POINTS_REFUND", "balance", "order", "redemption", "rollback", "reward")
	one := a.OK("POST", "/v1/redemptions/"+mugKid["id"].(string)+"/rollback", nil)
	if stacktest.Num(one["loyalty_card"].(map[string]any)["points"]) != 300 || balance() != 1000 {
		t.Fatalf("rollback of the mug: %v", one)
	}
	if w := a.OK("GET", "/v1/rewards/"+mug, nil); stacktest.Num(w["redeemed"]) != 0 {
		t.Fatalf("the mug's stock after its rollback: %v", w)
	}
	a.Fails("POST", "/v1/redemptions/"+mugKid["id"].(string)+"/rollback", nil, 400, "already_rolled_back")
	if b := balance(); b != 1000 {
		t.Fatalf("balance after a refused rollback: %d", b)
	}
	m = a.OK("GET", "/v1/loyalties/members/"+code, nil)
	if lc := m["loyalty_card"].(map[string]any); stacktest.Num(lc["points"]) != 1000 || stacktest.Num(m["redemption"].(map[string]any)["redeemed_points"]) != 0 {
		t.Fatalf("card after every rollback: %v", m)
	}
}

// Eight cards redeem a reward of stock 3 at once: exactly three pay for
// it, the others are refused (quantity_exceeded), stored as FAILURE
// redemptions, and keep their points.
func TestConcurrentCardsKeepTheRewardsStock(t *testing.T) {
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Spenders", nil)["id"].(string)
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "stock": 3,
		"parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": mug, "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}})
	var codes []string
	for i := range 8 {
		code := a.Member(campID, fmt.Sprintf("c%d", i))["code"].(string)
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 150})
		codes = append(codes, code)
	}
	var wg sync.WaitGroup
	statuses := make([]int, len(codes))
	for i, code := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": []any{
				map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": mug}}}})
			statuses[i] = r.Status
			if r.Status == 400 && r.JSON(t)["key"] != "quantity_exceeded" {
				t.Errorf("refusal: %s", r.Body)
			}
		}()
	}
	wg.Wait()
	ok, left := 0, int64(0)
	for i, code := range codes {
		if statuses[i] == 200 {
			ok++
		}
		left += stacktest.Num(a.OK("GET", "/v1/loyalties/members/"+code, nil)["loyalty_card"].(map[string]any)["balance"])
	}
	if ok != 3 || left != 8*150-3*100 {
		t.Fatalf("%d redeemed (statuses %v), %d points left", ok, statuses, left)
	}
	if w := a.OK("GET", "/v1/rewards/"+mug, nil); stacktest.Num(w["redeemed"]) != 3 {
		t.Fatalf("the stock: %v", w)
	}
	// Each refusal is stored, those that read the stock before others
	// took it too.
	if l := a.OK("GET", "/v1/redemptions?result=FAILURE", nil); stacktest.Num(l["total"]) != 5 {
		t.Fatalf("failures: %v", l["total"])
	}
}

// A reward a tier makes free still takes a unit of its stock and leaves
// its entry: a stock of one is redeemed once.
func TestAFreeRewardStillTakesItsStock(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 100})
	pin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pin", "stock": 1,
		"parameters": map[string]any{"product": map[string]any{"id": "prod_pin"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": pin, "parameters": map[string]any{"loyalty": map[string]any{"points": 50}}})
	a.Do("POST", "/v1/loyalties/"+campID+"/tiers", []map[string]any{{"name": "Everyone", "points": map[string]any{"from": 0, "to": 100000},
		"rewards": map[string]any{pin: map[string]any{"type": "CUSTOM", "points": 0}}}})
	body := map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": pin}}}}
	r := a.OK("POST", "/v1/redemptions", body)
	if kid := r["redemptions"].([]any)[0].(map[string]any); stacktest.Num(kid["loyalty_card"].(map[string]any)["points"]) != 0 {
		t.Fatalf("the free pin: %v", kid)
	}
	if w := a.OK("GET", "/v1/rewards/"+pin, nil); stacktest.Num(w["redeemed"]) != 1 {
		t.Fatalf("the pin's stock: %v", w)
	}
	tx := a.History(code)
	stacktest.CheckTx(t, tx[len(tx)-1], "POINTS_REDEMPTION", "balance", "redemption", "reward")
	a.Fails("POST", "/v1/redemptions", body, 400, "quantity_exceeded")
	a.OK("POST", "/v1/redemptions/"+r["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	if w := a.OK("GET", "/v1/rewards/"+pin, nil); stacktest.Num(w["redeemed"]) != 0 {
		t.Fatalf("the pin's stock after the rollback: %v", w)
	}
}
