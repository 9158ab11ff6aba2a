package stacked_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A voucher's redemption history (GET /v1/vouchers/{code}/redemption,
// the JS SDK's redemptions.getForVoucher) lists its redemptions, in
// stacks or alone, successful or not, each with its present status, and
// the rollbacks of them, newest first, with the voucher's quantities.
func TestAVouchersRedemptionHistory(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Voucher("TEN", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10},
		"redemption": map[string]any{"quantity": 5}})
	a.Voucher("GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 100000}})
	a.Voucher("IDLE", stacktest.PercentOff(5))
	stack := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "TEN"},
		map[string]any{"object": "voucher", "id": "GIFT"}}, "order": stacktest.Order([2]int{10000, 1})})
	var stackTen, stackGift string
	for _, k := range stack["redemptions"].([]any) {
		k := k.(map[string]any)
		if k["voucher"].(map[string]any)["code"] == "TEN" {
			stackTen = k["id"].(string)
		} else {
			stackGift = k["id"].(string)
		}
	}
	alone := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "TEN"}},
		"order": stacktest.Order([2]int{2000, 1})})["redemptions"].([]any)[0].(map[string]any)["id"].(string)
	rb := a.OK("POST", "/v1/redemptions/"+stackTen+"/rollback", map[string]any{"reason": "returned"})
	// A refused redemption is stored as FAILURE, and listed too.
	a.OK("POST", "/v1/vouchers/TEN/disable", nil)
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "TEN"}},
		"order": stacktest.Order([2]int{3000, 1})}, 400, "")
	a.OK("POST", "/v1/vouchers/TEN/enable", nil)

	h := a.OK("GET", "/v1/vouchers/TEN/redemption", nil)
	if h["object"] != "list" || h["data_ref"] != "redemption_entries" || stacktest.Num(h["quantity"]) != 5 ||
		stacktest.Num(h["redeemed_quantity"]) != 1 || stacktest.Num(h["total"]) != 4 {
		t.Fatalf("TEN's history: %v", h)
	}
	es := h["redemption_entries"].([]any)
	if len(es) != 4 {
		t.Fatalf("entries: %v", es)
	}
	failure := es[0].(map[string]any)
	if failure["object"] != "redemption" || failure["result"] != "FAILURE" || failure["status"] != "FAILED" {
		t.Fatalf("the refused redemption's entry: %v", failure)
	}
	es = es[1:]
	want := []struct{ id, object, status string }{
		{rb["id"].(string), "redemption_rollback", "SUCCEEDED"},
		{alone, "redemption", "SUCCEEDED"},
		{stackTen, "redemption", "ROLLED_BACK"},
	}
	if len(es) != len(want) {
		t.Fatalf("entries: %v", es)
	}
	for i, w := range want {
		e := es[i].(map[string]any)
		if e["id"] != w.id || e["object"] != w.object || e["status"] != w.status {
			t.Errorf("entry %d: %v %v %v, want %v", i, e["id"], e["object"], e["status"], w)
		}
	}
	if rbe := es[0].(map[string]any); rbe["redemption"] != stackTen || rbe["reason"] != "returned" {
		t.Errorf("the rollback entry: %v", rbe)
	}
	if g := a.OK("GET", "/v1/vouchers/GIFT/redemption", nil); stacktest.Num(g["total"]) != 1 ||
		g["redemption_entries"].([]any)[0].(map[string]any)["id"] != stackGift || g["quantity"] != nil {
		t.Fatalf("GIFT's history: %v", g)
	}
	if i := a.OK("GET", "/v1/vouchers/IDLE/redemption", nil); stacktest.Num(i["total"]) != 0 || len(i["redemption_entries"].([]any)) != 0 {
		t.Fatalf("an unredeemed voucher's history: %v", i)
	}
	a.Fails("GET", "/v1/vouchers/NOPE/redemption", nil, 404, "not_found")
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.Fails("GET", "/v1/vouchers/TEN/redemption", nil, 404, "not_found")
}
