package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// transactions reads every transaction of a list path, page by page.
func transactions(a stacktest.API, path string) []map[string]any {
	var out []map[string]any
	after := ""
	for {
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("starting_after_id", after)
		}
		l := a.OK("GET", path+"?"+q.Encode(), nil)
		for _, d := range l["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		if l["has_more"] != true {
			return out
		}
		after = l["more_starting_after"].(string)
	}
}

func TestGiftBalanceAndTransactions(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Gifts", "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 1,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0}}})
	campID := camp["id"].(string)
	a.OK("POST", "/v1/campaigns/"+campID+"/vouchers/GIFT-1", nil)
	a.OK("POST", "/v1/vouchers/DISC-1", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": variants["amount"]})

	b := a.OK("POST", "/v1/vouchers/GIFT-1/balance", map[string]any{"amount": 5000, "source_id": "top-up-1", "reason": "birthday"})
	want := map[string]any{"amount": 5000.0, "total": 5000.0, "balance": 5000.0, "type": "gift_voucher", "operation_type": "MANUAL",
		"object": "balance"}
	for k, v := range want {
		if b[k] != v {
			t.Fatalf("add: %s = %v, want %v: %v", k, b[k], v, b)
		}
	}
	vid := b["related_object"].(map[string]any)["id"].(string)
	b = a.OK("POST", "/v1/vouchers/"+vid+"/balance", map[string]any{"amount": -1200}) // by id too
	if b["amount"] != -1200.0 || b["balance"] != 3800.0 || b["total"] != 3800.0 {
		t.Fatalf("remove: %v", b)
	}
	g := a.OK("GET", "/v1/vouchers/GIFT-1", nil)["gift"].(map[string]any)
	if g["amount"] != 5000.0 || g["subtracted_amount"] != 1200.0 || g["balance"] != 3800.0 {
		t.Fatalf("gift figures: %v", g)
	}
	a.Fails("POST", "/v1/vouchers/GIFT-1/balance", map[string]any{"amount": -3801}, 400, "gift_amount_exceeded")
	a.Fails("POST", "/v1/vouchers/GIFT-1/balance", map[string]any{"amount": 0}, 400, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/GIFT-1/balance", map[string]any{}, 400, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/DISC-1/balance", map[string]any{"amount": 100}, 400, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/NOPE/balance", map[string]any{"amount": 100}, 404, "not_found")
	other.Fails("POST", "/v1/vouchers/GIFT-1/balance", map[string]any{"amount": 100}, 404, "not_found")
	other.Fails("GET", "/v1/vouchers/GIFT-1/transactions", nil, 404, "not_found")
	other.Fails("GET", "/v1/campaigns/"+campID+"/transactions", nil, 404, "not_found")

	ts := transactions(a, "/v1/vouchers/GIFT-1/transactions")
	if len(ts) != 2 || ts[0]["type"] != "CREDITS_ADDITION" || ts[1]["type"] != "CREDITS_REMOVAL" ||
		ts[0]["source_id"] != "top-up-1" || ts[0]["reason"] != "birthday" || ts[0]["source"] != "API" ||
		ts[0]["voucher_id"] != vid || ts[0]["campaign_id"] != campID {
		t.Fatalf("transactions: %v", ts)
	}
	if bal := ts[1]["details"].(map[string]any)["balance"].(map[string]any); bal["balance"] != 3800.0 || bal["amount"] != -1200.0 {
		t.Fatalf("removal's balance: %v", bal)
	}
	if l := a.OK("GET", "/v1/vouchers/GIFT-1/transactions?order=-id&limit=1", nil); l["has_more"] != true ||
		l["data"].([]any)[0].(map[string]any)["type"] != "CREDITS_REMOVAL" {
		t.Fatalf("newest first: %v", l)
	}
	if l := a.OK("GET", "/v1/vouchers/DISC-1/transactions", nil); len(l["data"].([]any)) != 0 {
		t.Fatalf("a discount voucher's transactions: %v", l)
	}
	for _, key := range []string{campID, "Gifts"} {
		if cs := transactions(a, "/v1/campaigns/"+url.PathEscape(key)+"/transactions"); len(cs) != 2 || cs[0]["id"] != ts[0]["id"] {
			t.Fatalf("the campaign's transactions: %v", cs)
		}
	}
	a.Fails("GET", "/v1/campaigns/camp_nope/transactions", nil, 404, "not_found")
}

// 16 clients add and remove credits on one gift card; then its balance is
// the sum of its transactions, no transaction left it below zero, and
// every change that succeeded left exactly one transaction.
func TestGiftBalanceUnderConcurrentWriters(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/vouchers/HOT-GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0}})
	var sum, ok, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				n := int64(1 + rand.IntN(500))
				if rand.IntN(2) == 0 {
					n = -n
				}
				r := a.Do("POST", "/v1/vouchers/HOT-GIFT/balance", map[string]any{"amount": n})
				switch {
				case r.Status == 200:
					sum.Add(n)
					ok.Add(1)
				case r.Status == 400 && n < 0 && r.JSON(t)["key"] == "gift_amount_exceeded":
					refused.Add(1)
				default:
					errs <- fmt.Sprintf("%d %s", r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	ts := transactions(a, "/v1/vouchers/HOT-GIFT/transactions")
	var total int64
	for _, x := range ts {
		bal := x["details"].(map[string]any)["balance"].(map[string]any)
		if bal["balance"].(float64) < 0 {
			t.Fatalf("a transaction left the card below zero: %v", x)
		}
		total += int64(bal["amount"].(float64))
	}
	g := a.OK("GET", "/v1/vouchers/HOT-GIFT", nil)["gift"].(map[string]any)
	if int64(len(ts)) != ok.Load() || total != sum.Load() || int64(g["balance"].(float64)) != total || g["balance"].(float64) < 0 ||
		int64(g["amount"].(float64)-g["subtracted_amount"].(float64)) != total {
		t.Fatalf("%d transactions summing to %d for %d changes summing to %d; gift %v", len(ts), total, ok.Load(), sum.Load(), g)
	}
	t.Logf("%d changes, %d refused for want of credits", ok.Load(), refused.Load())
}

// A gift card made with an amount opens with it, as an entry of its
// ledger: standalone or generated in a campaign, its balance is the sum of
// its transactions from the start. Vouchers' changes raise their events.
func TestGiftCardsOpenWithTheirAmountAndVouchersRaiseEvents(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("voucher.created", "voucher.updated", "voucher.enabled", "voucher.disabled", "voucher.deleted")
	sumOf := func(code string) (int64, int) {
		var total int64
		ts := a.OK("GET", "/v1/vouchers/"+code+"/transactions", nil)["data"].([]any)
		for _, x := range ts {
			total += int64(x.(map[string]any)["details"].(map[string]any)["balance"].(map[string]any)["amount"].(float64))
		}
		return total, len(ts)
	}
	a.OK("POST", "/v1/vouchers/OPEN-1", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 2500}})
	a.OK("POST", "/v1/vouchers/OPEN-1/balance", map[string]any{"amount": -500})
	if sum, n := sumOf("OPEN-1"); sum != 2000 || n != 2 {
		t.Fatalf("standalone: sum %d of %d entries", sum, n)
	}
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Cards", "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 3,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 700}}})
	a.WaitAction(camp["async_action_id"].(string))
	for _, v := range a.OK("GET", "/v1/vouchers?campaign_id="+camp["id"].(string), nil)["vouchers"].([]any) {
		code := v.(map[string]any)["code"].(string)
		if sum, n := sumOf(code); sum != 700 || n != 1 || v.(map[string]any)["gift"].(map[string]any)["balance"] != 700.0 {
			t.Fatalf("generated %s: sum %d of %d entries", code, sum, n)
		}
	}
	a.OK("PUT", "/v1/vouchers/OPEN-1", map[string]any{"metadata": map[string]any{"k": "v"}})
	a.OK("POST", "/v1/vouchers/OPEN-1/disable", nil)
	a.OK("POST", "/v1/vouchers/OPEN-1/enable", nil)
	if r := a.Do("DELETE", "/v1/vouchers/OPEN-1", nil); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// A campaign's generated vouchers are told by campaign.vouchers.generation.completed, not one by one.
	for _, e := range []string{"voucher.created", "voucher.updated", "voucher.disabled", "voucher.enabled", "voucher.deleted"} {
		if got := hooks.Wait(t, e, 1); got["voucher"].(map[string]any)["code"] != "OPEN-1" {
			t.Fatalf("%s: %v", e, got)
		}
	}
}

// A gift card of no campaign has transactions of no campaign: their
// campaign_id is null, in the lists and in the webhook events, never "".
func TestGiftTransactionsOfNoCampaignSayNull(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("voucher.gift.transaction.created")
	a.OK("POST", "/v1/vouchers/ALONE-1", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1000}})
	a.OK("POST", "/v1/vouchers/ALONE-1/balance", map[string]any{"amount": 250})
	r := a.Do("GET", "/v1/vouchers/ALONE-1/transactions", nil)
	ts := r.JSON(t)["data"].([]any)
	if r.Status != 200 || len(ts) != 2 {
		t.Fatalf("transactions: %d %s", r.Status, r.Body)
	}
	for _, x := range ts {
		id, present := x.(map[string]any)["campaign_id"]
		if !present || id != nil {
			t.Fatalf("campaign_id of a transaction of no campaign: %v (present %v), want null: %s", id, present, r.Body)
		}
	}
	ev := hooks.Wait(t, "voucher.gift.transaction.created", 1)
	if id, present := ev["transaction"].(map[string]any)["campaign_id"]; !present || id != nil {
		t.Fatalf("the event's transaction: campaign_id %v (present %v), want null: %v", id, present, ev)
	}
}

// A gift amount is bounded by what a balance holds, 1e11 cents, wherever
// it is set: a card over it would take no later change of its balance.
func TestGiftAmountsAreBoundedByWhatABalanceHolds(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	const limit, tooMuch = 100_000_000_000, 1 << 53
	fails := func(method, path string, body any, field string) {
		t.Helper()
		e := a.Fails(method, path, body, 400, "invalid_payload")
		if d, _ := e["details"].(string); !strings.Contains(d, field) {
			t.Fatalf("%s %s: the error does not name %s: %v", method, path, field, e)
		}
	}
	gift := func(amount int64) map[string]any { return map[string]any{"amount": amount} }
	fails("POST", "/v1/vouchers/BIG-1", map[string]any{"type": "GIFT_VOUCHER", "gift": gift(tooMuch)}, "gift.amount")
	fails("POST", "/v1/vouchers/BIG-1", map[string]any{"type": "GIFT_VOUCHER", "gift": gift(limit + 1)}, "gift.amount")
	fails("POST", "/v1/campaigns", map[string]any{"name": "Big", "campaign_type": "GIFT_VOUCHERS",
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": gift(tooMuch)}}, "voucher.gift.amount")
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Cards", "campaign_type": "GIFT_VOUCHERS",
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": gift(limit)}})
	fails("PUT", "/v1/campaigns/"+camp["id"].(string), map[string]any{"gift": gift(tooMuch)}, "gift.amount")

	// A card at the limit: no addition takes it past, a removal and an
	// addition back to it do.
	a.OK("POST", "/v1/vouchers/MAX-1", map[string]any{"type": "GIFT_VOUCHER", "gift": gift(limit)})
	fails("POST", "/v1/vouchers/MAX-1/balance", map[string]any{"amount": 1}, "amount")
	fails("POST", "/v1/vouchers/MAX-1/balance", map[string]any{"amount": tooMuch}, "amount")
	a.OK("POST", "/v1/vouchers/MAX-1/balance", map[string]any{"amount": -1})
	a.OK("POST", "/v1/vouchers/MAX-1/balance", map[string]any{"amount": 1})
	if g := a.OK("GET", "/v1/vouchers/MAX-1", nil)["gift"].(map[string]any); g["balance"] != float64(limit) {
		t.Fatalf("gift figures: %v", g)
	}
	if ts := transactions(a, "/v1/vouchers/MAX-1/transactions"); len(ts) != 3 {
		t.Fatalf("%d transactions, want the opening, the removal and the addition: %v", len(ts), ts)
	}
}
