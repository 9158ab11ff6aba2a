package exports_test

import (
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
