package e2e_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) {
	stacktest.TraceRequests() // TestAValidationReadsInTwoRoundTrips counts them
	dbtest.Main(m)
}

func redeemables(codes ...string) []any {
	var out []any
	for _, c := range codes {
		out = append(out, map[string]any{"object": "voucher", "id": c})
	}
	return out
}

// Stacked validation: each redeemable's verdict and the order recalculated
// with the applicable ones in turn; one inapplicable makes the request
// invalid and skips the rest.
func TestStackedValidation(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	a.Voucher("TEN", stacktest.PercentOff(10))
	a.Voucher("FIVE-OFF", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}})
	a.Voucher("GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 2000}})
	a.Voucher("OFF", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "active": false})
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("FIVE-OFF", "TEN", "GIFT"),
		"order": stacktest.Order([2]int{1000, 3}, [2]int{2500, 1}), "customer": map[string]any{"source_id": "ann"}})
	o := v["order"].(map[string]any)
	// 5500 - 500 = 5000; 10 % = 500; gift takes the rest, 2000 of 4500.
	if v["valid"] != true || stacktest.Num(o["amount"]) != 5500 || stacktest.Num(o["discount_amount"]) != 3000 || stacktest.Num(o["total_amount"]) != 2500 ||
		len(v["redeemables"].([]any)) != 3 || len(v["inapplicable_redeemables"].([]any)) != 0 {
		t.Fatalf("validation: %v", v)
	}
	rs := v["redeemables"].([]any)
	if r := rs[2].(map[string]any); r["status"] != "APPLICABLE" || stacktest.Num(r["result"].(map[string]any)["gift"].(map[string]any)["credits"]) != 2000 {
		t.Fatalf("gift: %v", r)
	}
	if r := rs[1].(map[string]any); stacktest.Num(r["order"].(map[string]any)["applied_discount_amount"]) != 500 {
		t.Fatalf("percent's own order: %v", r)
	}
	// One disabled: invalid, the others skipped, nothing discounted.
	v = a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("TEN", "OFF"), "order": stacktest.Order([2]int{1000, 1})})
	in := v["inapplicable_redeemables"].([]any)
	if v["valid"] != false || len(in) != 1 || in[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any)["key"] != "voucher_disabled" ||
		v["redeemables"].([]any)[0].(map[string]any)["status"] != "SKIPPED" || stacktest.Num(v["order"].(map[string]any)["total_discount_amount"]) != 0 {
		t.Fatalf("with a disabled voucher: %v", v)
	}
	// Another project's voucher is not found there.
	v = other.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("TEN"), "order": stacktest.Order([2]int{1000, 1})})
	if v["valid"] != false || v["inapplicable_redeemables"].([]any)[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any)["key"] != "not_found" {
		t.Fatalf("another project's voucher: %v", v)
	}
	for _, bad := range []map[string]any{{}, {"redeemables": []any{}}, {"redeemables": redeemables("TEN", "TEN")},
		{"redeemables": []any{map[string]any{"object": "coupon", "id": "TEN"}}}, {"redeemables": []any{map[string]any{"object": "voucher"}}},
		{"redeemables": redeemables("TEN"), "order": map[string]any{"items": []any{map[string]any{"price": -1, "quantity": 1}}}},
		{"redeemables": redeemables("TEN"), "session": map[string]any{"type": "OPEN"}}} {
		a.Fails("POST", "/v1/validations", bad, 400, "invalid_payload")
	}
}

// A redemption applies every redeemable in one transaction: counts,
// credits, the order and the redemptions, read back and listed; a failing
// redeemable leaves nothing applied and is stored as FAILURE.
func TestStackedRedemptionAllOrNothing(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("redemption.succeeded", "redemption.failed", "redemption.rollback.succeeded", "redemption.rollback.failed")
	a.Voucher("TEN", stacktest.PercentOff(10))
	a.Voucher("GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 3000}})
	a.Voucher("OLD", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "expiration_date": "2020-01-01T00:00:00Z"})
	r := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("TEN", "GIFT"),
		"order":    map[string]any{"source_id": "order-1", "items": stacktest.Order([2]int{2000, 1})["items"]},
		"customer": map[string]any{"source_id": "bob"}, "metadata": map[string]any{"shop": "north"}})
	parent := r["parent_redemption"].(map[string]any)
	kids := r["redemptions"].([]any)
	if len(kids) != 2 || parent["result"] != "SUCCESS" || stacktest.Num(parent["amount"]) != 2000 || stacktest.Num(r["order"].(map[string]any)["total_amount"]) != 0 {
		t.Fatalf("redemption: %v", r)
	}
	if g := a.OK("GET", "/v1/vouchers/GIFT", nil); stacktest.Num(g["gift"].(map[string]any)["balance"]) != 1200 {
		t.Fatalf("gift after: %v", g["gift"])
	}
	if ten := a.OK("GET", "/v1/vouchers/TEN", nil); stacktest.Num(ten["redemption"].(map[string]any)["redeemed_quantity"]) != 1 {
		t.Fatalf("TEN after: %v", ten["redemption"])
	}
	txs := a.OK("GET", "/v1/vouchers/GIFT/transactions", nil)["data"].([]any)
	bal := txs[0].(map[string]any)["details"].(map[string]any)["balance"].(map[string]any)
	if txs[0].(map[string]any)["type"] != "CREDITS_REDEMPTION" || stacktest.Num(bal["amount"]) != -1800 || stacktest.Num(bal["balance"]) != 1200 ||
		bal["operation_type"] != "AUTOMATIC" {
		t.Fatalf("gift transactions: %v", txs)
	}
	if ord := a.OK("GET", "/v1/orders/order-1", nil); stacktest.Num(ord["discount_amount"]) != 2000 {
		t.Fatalf("order: %v", ord)
	}
	if g := a.OK("GET", "/v1/redemptions/"+parent["id"].(string), nil); g["status"] != "SUCCEEDED" ||
		len(g["related_redemptions"].(map[string]any)["redemptions"].([]any)) != 2 {
		t.Fatalf("parent read back: %v", g)
	}
	// The last redeemable fails: nothing of the first is applied.
	a.Fails("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("TEN", "OLD"), "order": stacktest.Order([2]int{1000, 1})},
		400, "voucher_expired")
	if ten := a.OK("GET", "/v1/vouchers/TEN", nil); stacktest.Num(ten["redemption"].(map[string]any)["redeemed_quantity"]) != 1 {
		t.Fatalf("TEN after a failed stack: %v", ten["redemption"])
	}
	l := a.OK("GET", "/v1/redemptions?result=FAILURE", nil)
	if stacktest.Num(l["total"]) != 2 || l["redemptions"].([]any)[0].(map[string]any)["failure_code"] == nil {
		t.Fatalf("failures: %v", l)
	}
	if l := a.OK("GET", "/v1/redemptions?result=SUCCESS&customer="+kids[0].(map[string]any)["customer_id"].(string), nil); stacktest.Num(l["total"]) != 2 {
		t.Fatalf("bob's: %v", l)
	}
	hooks.Wait(t, "redemption.succeeded", 2)
	hooks.Wait(t, "redemption.failed", 2)
	// Rollback of the whole: counts and credits back; twice is refused.
	rb := a.OK("POST", "/v1/redemptions/"+parent["id"].(string)+"/rollbacks", map[string]any{"reason": "returned"})
	if len(rb["rollbacks"].([]any)) != 2 || rb["parent_rollback"] == nil {
		t.Fatalf("rollbacks: %v", rb)
	}
	if g := a.OK("GET", "/v1/vouchers/GIFT", nil); stacktest.Num(g["gift"].(map[string]any)["balance"]) != 3000 {
		t.Fatalf("gift after rollback: %v", g["gift"])
	}
	if ten := a.OK("GET", "/v1/vouchers/TEN", nil); stacktest.Num(ten["redemption"].(map[string]any)["redeemed_quantity"]) != 0 {
		t.Fatalf("TEN after rollback: %v", ten["redemption"])
	}
	a.Fails("POST", "/v1/redemptions/"+parent["id"].(string)+"/rollbacks", nil, 400, "already_rolled_back")
	a.Fails("POST", "/v1/redemptions/"+kids[0].(map[string]any)["id"].(string)+"/rollback", nil, 400, "already_rolled_back")
	if g := a.OK("GET", "/v1/redemptions/"+kids[0].(map[string]any)["id"].(string), nil); g["status"] != "ROLLED_BACK" {
		t.Fatalf("child after rollback: %v", g)
	}
	hooks.Wait(t, "redemption.rollback.succeeded", 2)
	// The two refused rollbacks raised redemption.rollback.failed, naming
	// the parent and the child, with the refusal.
	hooks.Wait(t, "redemption.rollback.failed", 2)
	named := map[any]bool{}
	for _, o := range hooks.All("redemption.rollback.failed") {
		f := o["redemption_rollback"].(map[string]any)
		if f["result"] != "FAILURE" || f["failure_code"] != "already_rolled_back" {
			t.Fatalf("rollback.failed: %v", f)
		}
		named[f["redemption"]] = true
	}
	if !named[parent["id"]] || !named[kids[0].(map[string]any)["id"]] {
		t.Fatalf("rollback.failed named %v", named)
	}
	a.Fails("GET", "/v1/redemptions/r_nothing", nil, 404, "not_found")
	a.Fails("POST", "/v1/redemptions/r_nothing/rollbacks", nil, 404, "not_found")
}

// 50 concurrent redemptions of a voucher of quantity 10: exactly 10
// succeed, the other 40 are FAILURE redemptions with the reason.
func TestConcurrentRedemptionsKeepTheQuantity(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	a.Voucher("TENTIMES", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": 10}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := map[string]any{"redeemables": redeemables("TENTIMES"), "order": stacktest.Order([2]int{1000, 1}),
				"customer": map[string]any{"source_id": fmt.Sprintf("c%d", i)}}
			r := a.Do("POST", "/v1/redemptions", body)
			// Fifty at once on one voucher outlast the project's wait for a
			// database connection on a busy machine: a 503 project_over_share
			// is answered before any work, and the client tries again after
			// its Retry-After, as the SDKs do.
			for try := 0; r.Status == 503 && r.JSON(t)["key"] == "project_over_share" && try < 5; try++ {
				time.Sleep(time.Second)
				r = a.Do("POST", "/v1/redemptions", body)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Status == 200:
				ok++
			case r.Status == 400 && r.JSON(t)["key"] == "quantity_exceeded":
				refused++
			default:
				t.Errorf("redemption %d: %d %s", i, r.Status, r.Body)
			}
		}(i)
	}
	wg.Wait()
	if ok != 10 || refused != 40 {
		t.Fatalf("%d succeeded, %d refused", ok, refused)
	}
	if v := a.OK("GET", "/v1/vouchers/TENTIMES", nil); stacktest.Num(v["redemption"].(map[string]any)["redeemed_quantity"]) != 10 {
		t.Fatalf("voucher: %v", v["redemption"])
	}
	if l := a.OK("GET", "/v1/redemptions?result=FAILURE&limit=100", nil); stacktest.Num(l["total"]) != 40 ||
		l["redemptions"].([]any)[0].(map[string]any)["failure_code"] != "quantity_exceeded" {
		t.Fatalf("failures: %v", l["total"])
	}
}

// A LOCK session reserves a voucher of quantity 1 for its key: another
// customer's validation finds it taken until the session is released.
func TestLockSessionReservesTheVoucher(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Voucher("ONCE", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": 1}})
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("ONCE"), "order": stacktest.Order([2]int{1000, 1}),
		"customer": map[string]any{"source_id": "ann"}, "session": map[string]any{"type": "LOCK", "key": "ann-cart", "ttl": 1, "ttl_unit": "HOURS"}})
	if v["valid"] != true || v["session"].(map[string]any)["key"] != "ann-cart" {
		t.Fatalf("ann's validation: %v", v)
	}
	other := map[string]any{"redeemables": redeemables("ONCE"), "order": stacktest.Order([2]int{1000, 1}), "customer": map[string]any{"source_id": "bob"}}
	if v := a.OK("POST", "/v1/validations", other); v["valid"] != false {
		t.Fatalf("bob while ann holds it: %v", v)
	}
	a.Fails("POST", "/v1/redemptions", other, 400, "quantity_exceeded")
	// Ann's own session still validates.
	mine := map[string]any{"redeemables": redeemables("ONCE"), "order": stacktest.Order([2]int{1000, 1}), "session": map[string]any{"key": "ann-cart"}}
	if v := a.OK("POST", "/v1/validations", mine); v["valid"] != true {
		t.Fatalf("ann again: %v", v)
	}
	if r := a.Do("DELETE", "/v1/vouchers/ONCE/sessions/ann-cart", nil); r.Status != 204 {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	a.Fails("DELETE", "/v1/vouchers/ONCE/sessions/ann-cart", nil, 404, "not_found")
	if v := a.OK("POST", "/v1/validations", other); v["valid"] != true {
		t.Fatalf("bob after release: %v", v)
	}
}

// A validation rule assigned to a voucher refuses the orders it does not
// admit, with the rule's message, and admits the others.
func TestValidationRulesGuardRedeemables(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	v := a.Voucher("BIG", stacktest.PercentOff(20))
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 100", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{10000}},
			"error": map[string]any{"message": "Spend over 100 to use BIG."}}, "logic": "1"}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments",
		map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	small := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("BIG"), "order": stacktest.Order([2]int{5000, 1})})
	err := small["inapplicable_redeemables"].([]any)[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any)
	if small["valid"] != false || err["details"] != "Spend over 100 to use BIG." {
		t.Fatalf("small order: %v", small)
	}
	big := a.OK("POST", "/v1/validations", map[string]any{"redeemables": redeemables("BIG"), "order": stacktest.Order([2]int{5000, 3})})
	if big["valid"] != true || stacktest.Num(big["order"].(map[string]any)["discount_amount"]) != 3000 {
		t.Fatalf("big order: %v", big)
	}
}

// Rules on redemption counts read the redemptions made so far (the one
// being judged included): at most one per customer of a voucher, at most
// two in a campaign; a rolled-back redemption no longer counts.
func TestRedemptionCountRules(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := func(name string, limit int) string {
		return a.OK("POST", "/v1/validation-rules", map[string]any{"name": name, "type": "advanced",
			"rules": map[string]any{"1": map[string]any{"name": name, "conditions": map[string]any{"$less_than_or_equal": []any{limit}}},
				"logic": "1"}})["id"].(string)
	}
	assign := func(ruleID, typ, id string) {
		a.OK("POST", "/v1/validation-rules/"+ruleID+"/assignments", map[string]any{"related_object_type": typ, "related_object_id": id})
	}
	once := a.Voucher("ONCE-EACH", stacktest.PercentOff(10))
	assign(rule("redemption.count.per_customer", 1), "voucher", once["id"].(string))
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Two in all", "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 3,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}})
	if id, ok := c["async_action_id"].(string); ok {
		a.WaitAction(id)
	}
	assign(rule("redemption.count.per_campaign", 2), "campaign", c["id"].(string))
	redeem := func(code, customer string) stacktest.Resp {
		return a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables(code), "order": stacktest.Order([2]int{5000, 1}),
			"customer": map[string]any{"source_id": customer}})
	}
	if r := redeem("ONCE-EACH", "ann"); r.Status != 200 {
		t.Fatalf("ann's first: %d %s", r.Status, r.Body)
	}
	if r := redeem("ONCE-EACH", "ann"); r.Status != 400 || r.JSON(t)["key"] != "order_rules_violated" {
		t.Fatalf("ann's second: %d %s", r.Status, r.Body)
	}
	if r := redeem("ONCE-EACH", "bob"); r.Status != 200 {
		t.Fatalf("bob's first: %d %s", r.Status, r.Body)
	}
	var codes []string
	for _, x := range a.OK("GET", "/v1/vouchers?campaign_id="+c["id"].(string), nil)["vouchers"].([]any) {
		codes = append(codes, x.(map[string]any)["code"].(string))
	}
	first := redeem(codes[0], "ann")
	if first.Status != 200 || redeem(codes[1], "bob").Status != 200 {
		t.Fatalf("two of the campaign: %d %s", first.Status, first.Body)
	}
	if r := redeem(codes[2], "cy"); r.Status != 400 || r.JSON(t)["key"] != "order_rules_violated" {
		t.Fatalf("the campaign's third: %d %s", r.Status, r.Body)
	}
	a.OK("POST", "/v1/redemptions/"+first.JSON(t)["parent_redemption"].(map[string]any)["id"].(string)+"/rollbacks", nil)
	if r := redeem(codes[2], "cy"); r.Status != 200 {
		t.Fatalf("after a rollback: %d %s", r.Status, r.Body)
	}
}
