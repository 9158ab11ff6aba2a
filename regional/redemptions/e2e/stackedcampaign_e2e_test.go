package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// CAMPAIGN rewards pay inside a stacked redemption as they do alone: in
// the stack's one transaction, a card buys a new discount voucher, credits
// on the member's gift card and points on their card of another program,
// beside a discount voucher the request redeems; the children show what
// was given (reward.voucher); a stack that fails gives nothing; rolling the
// stack back takes all of it back exactly. A stack that redeems the gift
// card a reward of it credits is refused.
func TestCampaignRewardsPayInsideAStackedRedemption(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Spenders", nil)["id"].(string)
	travelID := a.Campaign("Travel", nil)["id"].(string)
	cust := map[string]any{"source_id": "ann"}
	code := a.Member(progID, "ann")["code"].(string)
	miles := a.Member(travelID, "ann")["code"].(string) // held already: locked among the stack by code
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
	disc, gift := givingCampaigns(a)
	gc := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": gift["name"]}, "customer": cust})["voucher"].(map[string]any)["code"].(string)
	a.OK("POST", "/v1/vouchers", map[string]any{"code": "TENOFF", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1000}})
	reward := func(name string, campaign map[string]any, points int) string {
		w := a.OK("POST", "/v1/rewards", map[string]any{"name": name, "parameters": map[string]any{"campaign": campaign}})["id"].(string)
		a.OK("POST", "/v1/loyalties/"+progID+"/rewards", []map[string]any{{"reward": w,
			"parameters": map[string]any{"loyalty": map[string]any{"points": points}}}})
		return w
	}
	discR := reward("A voucher", map[string]any{"id": disc["id"]}, 100)
	giftR := reward("Credits", map[string]any{"id": gift["id"], "balance": 2500}, 200)
	milesR := reward("Miles", map[string]any{"id": travelID, "balance": 40}, 300)
	stack := func(rewardID string, more ...any) stacktest.Resp {
		return a.Do("POST", "/v1/redemptions", map[string]any{"customer": cust, "order": stacktest.Order([2]int{5000, 1}),
			"redeemables": append([]any{map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": rewardID}}}, more...)})
	}
	tenOff := map[string]any{"object": "voucher", "id": "TENOFF"}

	// A stack that fails (an unknown voucher beside) gives nothing.
	if r := stack(giftR, map[string]any{"object": "voucher", "id": "NOPE"}); r.Status != 404 && r.Status != 400 {
		t.Fatalf("failing stack: %d %s", r.Status, r.Body)
	}
	if giftBalance(a, gc) != 0 || balanceOf(a, code) != 1000 {
		t.Fatalf("a failed stack gave: gift %v, card %v", giftBalance(a, gc), balanceOf(a, code))
	}

	var parents []string
	givenOf := func(r stacktest.Resp) map[string]any {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("stack: %d %s", r.Status, r.Body)
		}
		m := r.JSON(t)
		parents = append(parents, m["parent_redemption"].(map[string]any)["id"].(string))
		for _, x := range m["redemptions"].([]any) {
			if rw, ok := x.(map[string]any)["reward"].(map[string]any); ok {
				return rw["voucher"].(map[string]any)
			}
		}
		t.Fatalf("no reward in %s", r.Body)
		return nil
	}
	v := givenOf(stack(discR, tenOff))
	if v["campaign_id"] != disc["id"] || v["is_referral_code"] == true {
		t.Fatalf("the voucher given: %v", v)
	}
	newCode := v["code"].(string)
	if h := a.OK("GET", "/v1/vouchers/"+newCode, nil); h["holder_id"] == nil || h["active"] != true {
		t.Fatalf("the voucher given is the member's: %v", h)
	}
	if v := givenOf(stack(giftR)); v["code"] != gc {
		t.Fatalf("credits went to %v, not the member's gift card %s", v["code"], gc)
	}
	if v := givenOf(stack(milesR)); v["code"] != miles {
		t.Fatalf("points went to %v, not the member's card %s", v["code"], miles)
	}
	if giftBalance(a, gc) != 2500 || balanceOf(a, miles) != 40 || balanceOf(a, code) != 400 || sumPoints(a, code) != 400 {
		t.Fatalf("given: gift %v, miles %v, card %v (entries %v)", giftBalance(a, gc), balanceOf(a, miles), balanceOf(a, code), sumPoints(a, code))
	}
	if tx := last(a.History(miles)); tx["type"] != "POINTS_ADDITION" || tx["details"].(map[string]any)["reward"].(map[string]any)["id"] != milesR {
		t.Fatalf("the miles' entry: %v", tx)
	}

	// The gift card redeemed in the stack that a reward of it credits.
	a.Fails("POST", "/v1/redemptions", map[string]any{"customer": cust, "order": stacktest.Order([2]int{5000, 1}), "redeemables": []any{
		map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": giftR}},
		map[string]any{"object": "voucher", "id": gc, "gift": map[string]any{"credits": 100}}}}, 400, "invalid_payload")

	// Each stack rolled back takes back what it gave, exactly.
	for _, p := range parents {
		a.OK("POST", "/v1/redemptions/"+p+"/rollbacks", map[string]any{})
	}
	if h := a.OK("GET", "/v1/vouchers/"+newCode, nil); h["active"] != false {
		t.Fatalf("the voucher given after the rollback: %v", h)
	}
	if giftBalance(a, gc) != 0 || balanceOf(a, miles) != 0 || sumPoints(a, miles) != 0 || balanceOf(a, code) != 1000 || sumPoints(a, code) != 1000 {
		t.Fatalf("after the rollbacks: gift %v, miles %v, card %v", giftBalance(a, gc), balanceOf(a, miles), balanceOf(a, code))
	}
	if txs := giftTxs(a, gc); len(txs) != 2 || txs[1]["type"] != "CREDITS_REMOVAL" {
		t.Fatalf("gift card entries: %v", txs)
	}
}
