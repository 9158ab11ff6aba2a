package e2e_test

import (
	"strings"
	"testing"
)

// A discount CAMPAIGN reward's later redemptions begin with their
// transaction (the reward remembered as giving a new voucher) and count
// the vouchers they make in the transaction's last batch: the campaign's
// vouchers_count is every voucher made, and the same reward, changed to
// credit a gift card the member holds, is found out under the card's lock
// and given in the lock order, crediting the card once.
func TestARewardRememberedAsGivingANewVoucherCountsItAndFollowsAChange(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(progID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
	d, g := givingCampaigns(a)
	disc, gift := d["id"].(string), g["id"].(string)
	w := a.OK("POST", "/v1/rewards", map[string]any{"name": "A voucher", "parameters": map[string]any{"campaign": map[string]any{"id": disc}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+progID+"/rewards", map[string]any{"reward": w, "parameters": map[string]any{"loyalty": map[string]any{"points": 10}}})
	redeem := func() map[string]any {
		t.Helper()
		red := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": w}})
		return red["reward"].(map[string]any)["voucher"].(map[string]any)
	}
	codes := map[string]bool{}
	for range 5 {
		v := redeem()
		if !strings.HasPrefix(v["code"].(string), "THX-") || codes[v["code"].(string)] {
			t.Fatalf("voucher given: %v", v)
		}
		codes[v["code"].(string)] = true
	}
	if c := a.OK("GET", "/v1/campaigns/"+disc, nil); c["vouchers_count"] != 5.0 {
		t.Fatalf("the discount campaign's vouchers_count after 5 redemptions: %v", c["vouchers_count"])
	}

	// The member holds a gift card of the campaign the reward now credits.
	gc := a.OK("POST", "/v1/publications", map[string]any{"customer": map[string]any{"source_id": "ann"},
		"campaign": gift})["voucher"].(map[string]any)["code"].(string)
	a.OK("PUT", "/v1/rewards/"+w, map[string]any{"parameters": map[string]any{"campaign": map[string]any{"id": gift, "balance": 700}}})
	if v := redeem(); v["code"] != gc || giftBalance(a, gc) != 700 {
		t.Fatalf("the changed reward gave %v; the member's gift card %s holds %v, want 700", v["code"], gc, giftBalance(a, gc))
	}
	if c := a.OK("GET", "/v1/campaigns/"+gift, nil); c["vouchers_count"] != 1.0 {
		t.Fatalf("the gift campaign's vouchers_count: %v", c["vouchers_count"])
	}
	if b := balanceOf(a, code); b != 940 {
		t.Fatalf("the card's balance after six redemptions of 10 points: %v", b)
	}
}
