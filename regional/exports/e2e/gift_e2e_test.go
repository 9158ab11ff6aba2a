package e2e_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Gift cards' credits are in the ledger's table, so voucher_transactions
// exports them, their amount read from details.balance.amount.
func TestGiftTransactionsExport(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/vouchers/GIFT-X", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0}})
	a.OK("POST", "/v1/vouchers/GIFT-X/balance", map[string]any{"amount": 700, "reason": "top-up"})
	a.OK("POST", "/v1/vouchers/GIFT-X/balance", map[string]any{"amount": -200})
	e := export(a, "/v1/exports", map[string]any{"exported_object": "voucher_transactions",
		"parameters": map[string]any{"fields": []string{"type", "reason", "balance", "amount"}}})
	recs := file(a, e["result"].(map[string]any)["url"].(string))
	var got []string
	for _, r := range recs[1:] {
		got = append(got, strings.Join(r, ","))
	}
	if strings.Join(got, ";") != "CREDITS_ADDITION,top-up,700,700;CREDITS_REMOVAL,,500,-200" {
		t.Fatalf("rows: %v", recs)
	}
}

// A gift campaign's and a gift card's transactions export through the
// routes a loyalty campaign's and card's do (POST /v1/campaigns/{id} and
// /v1/vouchers/{code}/transactions/export), scoped to them, where both
// answered 404 for anything but loyalty; the loyalties' route stays
// loyalty's, and a discount voucher has no transactions to export.
func TestGiftCampaignAndCardTransactionsExport(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Cards", "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 2,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 700}}})
	a.WaitAction(camp["async_action_id"].(string))
	var codes []string
	for _, v := range a.OK("GET", "/v1/vouchers?campaign_id="+camp["id"].(string), nil)["vouchers"].([]any) {
		codes = append(codes, v.(map[string]any)["code"].(string))
	}
	a.OK("POST", "/v1/vouchers/"+codes[0]+"/balance", map[string]any{"amount": 300, "reason": "top-up"})
	a.OK("POST", "/v1/vouchers/ELSEWHERE", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 500}})
	a.Voucher("TEN", stacktest.PercentOff(10))
	fields := map[string]any{"parameters": map[string]any{"fields": []string{"voucher_id", "type", "amount", "balance"}}}
	rows := func(e map[string]any) []string {
		recs := file(a, e["result"].(map[string]any)["url"].(string))
		var got []string
		for _, r := range recs[1:] {
			got = append(got, strings.Join(r[1:], ","))
		}
		sort.Strings(got)
		return got
	}
	for _, ref := range []string{camp["id"].(string), "Cards"} {
		got := rows(export(a, "/v1/campaigns/"+ref+"/transactions/export", fields))
		if strings.Join(got, ";") != "CREDITS_ADDITION,300,1000;CREDITS_ADDITION,700,700;CREDITS_ADDITION,700,700" {
			t.Fatalf("the campaign's rows by %s: %v", ref, got)
		}
	}
	if got := rows(export(a, "/v1/vouchers/"+codes[0]+"/transactions/export", fields)); strings.Join(got, ";") != "CREDITS_ADDITION,300,1000;CREDITS_ADDITION,700,700" {
		t.Fatalf("the card's rows: %v", got)
	}
	a.Fails("POST", "/v1/loyalties/"+camp["id"].(string)+"/transactions/export", nil, 404, "not_found")
	a.Fails("POST", "/v1/vouchers/TEN/transactions/export", nil, 404, "not_found")
	a.Fails("POST", "/v1/vouchers/NOPE/transactions/export", nil, 404, "not_found")
}
