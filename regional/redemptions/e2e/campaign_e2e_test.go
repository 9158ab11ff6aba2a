package e2e_test

import (
	"strings"
	"testing"
)

// sumPoints is the sum of the changes of a card's entries.
func sumPoints(a api, code string) float64 {
	n := 0.0
	for _, tx := range a.History(code) {
		n += tx["details"].(map[string]any)["balance"].(map[string]any)["points"].(float64)
	}
	return n
}

func balanceOf(a api, code string) float64 {
	return card(a.OK("GET", "/v1/loyalties/members/"+code, nil))["balance"].(float64)
}

func giftBalance(a api, code string) float64 {
	return a.OK("GET", "/v1/vouchers/"+code, nil)["gift"].(map[string]any)["balance"].(float64)
}

// giftTxs are a gift card's entries, oldest first.
func giftTxs(a api, code string) []map[string]any {
	var out []map[string]any
	for _, d := range a.OK("GET", "/v1/vouchers/"+code+"/transactions?order=id&limit=100", nil)["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// givingCampaigns makes the two campaigns the CAMPAIGN rewards below give
// from: "Thanks", a discount campaign whose vouchers (THX-…) take 5.00
// off, and "Gift cards", a gift card campaign (GC-…) of empty cards.
func givingCampaigns(a api) (disc, gift map[string]any) {
	disc = a.OK("POST", "/v1/campaigns", map[string]any{"name": "Thanks", "campaign_type": "DISCOUNT_COUPONS", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500},
			"code_config": map[string]any{"pattern": "THX-######"}}})
	gift = a.OK("POST", "/v1/campaigns", map[string]any{"name": "Gift cards", "campaign_type": "GIFT_VOUCHERS", "type": "AUTO_UPDATE",
		"vouchers_count": 0, "voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0},
			"code_config": map[string]any{"pattern": "GC-######"}}})
	return disc, gift
}

// A CAMPAIGN reward of each kind is bought with a card's points in one
// transaction with what it gives (a new discount voucher published to the
// member, credits on their gift card, points on their card of another
// program), and a rollback takes both back exactly: the points refunded,
// the voucher disabled, the credits or points removed, each entry naming
// the reward and the redemption.
func TestCampaignRewardsGiveFromAnotherCampaignAndRollBackWhole(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(progID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
	disc, gift := givingCampaigns(a)
	travelID := a.Campaign("Travel", nil)["id"].(string)

	reward := func(name string, campaign map[string]any, points int) string {
		t.Helper()
		w := a.OK("POST", "/v1/rewards", map[string]any{"name": name, "parameters": map[string]any{"campaign": campaign}})
		p := w["parameters"].(map[string]any)["campaign"].(map[string]any)
		if w["type"] != "CAMPAIGN" || p["id"] != campaign["id"] || p["type"] == nil {
			t.Fatalf("campaign reward: %v", w)
		}
		a.OK("POST", "/v1/loyalties/"+progID+"/rewards", []map[string]any{{"reward": w["id"],
			"parameters": map[string]any{"loyalty": map[string]any{"points": points}}}})
		return w["id"].(string)
	}
	discR := reward("A voucher", map[string]any{"id": disc["id"]}, 100)
	giftR := reward("Credits", map[string]any{"id": gift["id"], "balance": 2500}, 200)
	miles := reward("Miles", map[string]any{"id": travelID, "balance": 40}, 300)
	redeem := func(rewardID string) map[string]any {
		t.Helper()
		return a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}})
	}
	given := func(red map[string]any) map[string]any {
		return red["reward"].(map[string]any)["voucher"].(map[string]any)
	}
	checkSums := func(want float64) {
		t.Helper()
		if b, s := balanceOf(a, code), sumPoints(a, code); b != want || s != want {
			t.Fatalf("card balance %v, its entries sum to %v, want %v", b, s, want)
		}
	}

	t.Run("a discount voucher, new, published to the member and disabled by the rollback", func(t *testing.T) {
		red := redeem(discR)
		v := given(red)
		vcode := v["code"].(string)
		if !strings.HasPrefix(vcode, "THX-") || v["type"] != "DISCOUNT_VOUCHER" || v["holder_id"] != red["customer_id"] ||
			red["loyalty_card"].(map[string]any)["points"] != 100.0 {
			t.Fatalf("redemption: %v", red)
		}
		checkSums(900)
		got := a.OK("GET", "/v1/vouchers/"+vcode, nil)
		if got["active"] != true || got["holder_id"] != red["customer_id"] {
			t.Fatalf("voucher given: %v", got)
		}
		// A second one is another new code.
		red2 := redeem(discR)
		if c2 := given(red2)["code"]; c2 == vcode {
			t.Fatalf("the same voucher twice: %v", c2)
		}
		checkSums(800)
		a.OK("POST", "/v1/redemptions/"+red["id"].(string)+"/rollback", nil)
		checkSums(900)
		if got := a.OK("GET", "/v1/vouchers/"+vcode, nil); got["active"] != false {
			t.Fatalf("voucher after the rollback: %v", got)
		}
		if got := a.OK("GET", "/v1/vouchers/"+given(red2)["code"].(string), nil); got["active"] != true {
			t.Fatalf("the other redemption's voucher after the rollback: %v", got)
		}
		a.OK("POST", "/v1/redemptions/"+red2["id"].(string)+"/rollback", nil)
		checkSums(1000)
	})

	t.Run("gift credits on the member's gift card, published once, removed by the rollback", func(t *testing.T) {
		red := redeem(giftR)
		gcode := given(red)["code"].(string)
		if !strings.HasPrefix(gcode, "GC-") || giftBalance(a, gcode) != 2500 {
			t.Fatalf("redemption: %v", red)
		}
		red2 := redeem(giftR)
		if given(red2)["code"] != gcode || giftBalance(a, gcode) != 5000 {
			t.Fatalf("a second redemption credits the same card: %v", red2)
		}
		checkSums(600)
		txs := giftTxs(a, gcode)
		last := txs[len(txs)-1]
		d := last["details"].(map[string]any)
		if last["type"] != "CREDITS_ADDITION" || d["reward"].(map[string]any)["id"] != giftR ||
			d["redemption"].(map[string]any)["id"] != red2["id"] || d["balance"].(map[string]any)["balance"] != 5000.0 {
			t.Fatalf("credit entry: %v", last)
		}
		a.OK("POST", "/v1/redemptions/"+red2["id"].(string)+"/rollback", nil)
		checkSums(800)
		txs = giftTxs(a, gcode)
		last = txs[len(txs)-1]
		if giftBalance(a, gcode) != 2500 || last["type"] != "CREDITS_REMOVAL" ||
			last["details"].(map[string]any)["rollback"] == nil {
			t.Fatalf("after the rollback: %v, %v", giftBalance(a, gcode), last)
		}
		// Credits the member spent cannot be taken back: the rollback is
		// refused whole, the points stay spent.
		a.OK("POST", "/v1/vouchers/"+gcode+"/balance", map[string]any{"amount": -2000})
		a.Fails("POST", "/v1/redemptions/"+red["id"].(string)+"/rollback", nil, 400, "")
		checkSums(800)
		if giftBalance(a, gcode) != 500 {
			t.Fatalf("gift card after a refused rollback: %v", giftBalance(a, gcode))
		}
		if g := a.OK("GET", "/v1/redemptions/"+red["id"].(string), nil); g["status"] != "SUCCEEDED" {
			t.Fatalf("redemption after a refused rollback: %v", g)
		}
	})

	t.Run("points on the member's card in another program, removed by the rollback", func(t *testing.T) {
		red := redeem(miles)
		tcode := given(red)["code"].(string)
		if tcode == code || given(red)["campaign_id"] != travelID || balanceOf(a, tcode) != 40 {
			t.Fatalf("redemption: %v", red)
		}
		checkSums(500)
		h := a.History(tcode)
		add := h[len(h)-1]
		d := add["details"].(map[string]any)
		if add["type"] != "POINTS_ADDITION" || d["reward"].(map[string]any)["id"] != miles || d["redemption"].(map[string]any)["id"] != red["id"] {
			t.Fatalf("addition entry: %v", add)
		}
		a.OK("POST", "/v1/redemptions/"+red["id"].(string)+"/rollback", nil)
		checkSums(800)
		if b, s := balanceOf(a, tcode), sumPoints(a, tcode); b != 0 || s != 0 {
			t.Fatalf("other card after the rollback: balance %v, entries %v", b, s)
		}
		if h := a.History(tcode); h[len(h)-1]["type"] != "POINTS_REMOVAL" {
			t.Fatalf("removal entry: %v", h[len(h)-1])
		}
		// A program's points reward offered by the program itself is refused,
		// and takes nothing.
		own := a.OK("POST", "/v1/rewards", map[string]any{"name": "Own", "parameters": map[string]any{"campaign": map[string]any{"id": progID, "balance": 5}}})
		a.OK("POST", "/v1/loyalties/"+progID+"/rewards", []map[string]any{{"reward": own["id"], "parameters": map[string]any{"loyalty": map[string]any{"points": 1}}}})
		a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": own["id"]}}, 400, "invalid_payload")
		checkSums(800)
	})
}
