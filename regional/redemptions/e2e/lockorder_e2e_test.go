package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// CAMPAIGN rewards lock two cards, or a card and a gift card, in one
// transaction: the paying card and the one they give to. Rewards giving in
// opposite directions between two programs, their rollbacks, and stacked
// redemptions naming the gift card and the card or paying with a CAMPAIGN
// reward, all at once on a database
// server of their own, must take the locks in the documented order (by
// code), so the server's log holds no deadlock; and every point adds up.
func TestCampaignRewardsLockInCodeOrder(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"api"}})
	a := api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
	codes := func(prefix string) map[string]any {
		return map[string]any{"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0},
			"code_config": map[string]any{"prefix": prefix, "length": 6, "charset": "ABCDEFGHJKLMNPQRSTUVWXYZ"}}}
	}
	p1 := a.Campaign("North", codes("N-"))["id"].(string)
	p2 := a.Campaign("South", codes("S-"))["id"].(string)
	north, south := a.Member(p1, "ann")["code"].(string), a.Member(p2, "ann")["code"].(string)
	for _, c := range []string{north, south} {
		a.OK("POST", "/v1/loyalties/members/"+c+"/balance", map[string]any{"points": 1000})
	}
	// The gift card's code sorts before both cards'.
	gift := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Gift cards", "campaign_type": "GIFT_VOUCHERS", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0},
			"code_config": map[string]any{"pattern": "A-######"}}})
	reward := func(name, program string, campaign map[string]any) string {
		w := a.OK("POST", "/v1/rewards", map[string]any{"name": name, "parameters": map[string]any{"campaign": campaign}})["id"].(string)
		a.OK("POST", "/v1/loyalties/"+program+"/rewards", []map[string]any{{"reward": w,
			"parameters": map[string]any{"loyalty": map[string]any{"points": 1}}}})
		return w
	}
	toSouth := reward("To south", p1, map[string]any{"id": p2, "balance": 1})
	toNorth := reward("To north", p2, map[string]any{"id": p1, "balance": 1})
	credits := reward("Credits", p2, map[string]any{"id": gift["id"], "balance": 100})
	coin := a.OK("POST", "/v1/rewards", map[string]any{"name": "Coins",
		"parameters": map[string]any{"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 1}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+p2+"/rewards", map[string]any{"reward": coin})

	redeem := func(code, rewardID string) stacktest.Resp {
		return a.Do("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}})
	}
	gc := redeem(south, credits).JSON(t)["reward"].(map[string]any)["voucher"].(map[string]any)["code"].(string)
	// 300 credits: the twelve stacks spend at most 20 each, whenever the
	// credits given meanwhile commit.
	redeem(south, credits)
	redeem(south, credits)
	var made []string
	for range 6 {
		made = append(made, redeem(north, toSouth).JSON(t)["id"].(string), redeem(south, toNorth).JSON(t)["id"].(string))
	}
	var reqs []func() stacktest.Resp
	for i := range 12 {
		reqs = append(reqs,
			func() stacktest.Resp { return redeem(north, toSouth) },
			func() stacktest.Resp { return redeem(south, toNorth) },
			func() stacktest.Resp { return redeem(south, credits) },
			func() stacktest.Resp { return a.Do("POST", "/v1/redemptions/"+made[i]+"/rollback", map[string]any{}) },
			func() stacktest.Resp {
				return a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": []any{
					map[string]any{"object": "voucher", "id": gc},
					map[string]any{"object": "voucher", "id": south, "reward": map[string]any{"id": coin, "points": 1}}},
					"order": stacktest.Order([2]int{20, 1})})
			},
			// A CAMPAIGN reward inside a stack: the north card it gives to
			// is locked among the stack's codes, before the paying one.
			func() stacktest.Resp {
				return a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": []any{
					map[string]any{"object": "voucher", "id": south, "reward": map[string]any{"id": toNorth}}}})
			},
		)
	}
	for i, x := range stacktest.Concurrently(a.API, reqs) {
		if x.Status != 200 {
			t.Errorf("request %d (kind %d): %d %s after %v", i, i%6, x.Status, x.Key, x.Elapsed)
		}
	}
	for _, c := range []string{north, south} {
		if b, s := balanceOf(a, c), sumPoints(a, c); b != s {
			t.Errorf("card %s: balance %v, its entries sum to %v", c, b, s)
		}
	}
	if n := e.Servers["api"].Deadlocks(t); n != 0 {
		t.Fatalf("the database detected %d deadlocks", n)
	}
}
