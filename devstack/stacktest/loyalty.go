package stacktest

import (
	"sort"
	"strings"
	"testing"
)

// The loyalty program's helpers, shared by the tests of the packages built
// on it (loyalty, earning, redemptions).

// Campaign creates a loyalty campaign of one card with no points; extra
// fields replace or add to the body.
func (a API) Campaign(name string, extra map[string]any) map[string]any {
	a.T.Helper()
	body := map[string]any{"name": name, "vouchers_count": 1,
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0},
			"code_config": map[string]any{"prefix": "LC-", "length": 6, "charset": "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"}}}
	for k, v := range extra {
		body[k] = v
	}
	return a.OK("POST", "/v1/loyalties", body)
}

// Member adds a card of campaign for the customer sourceID.
func (a API) Member(campaign, sourceID string) map[string]any {
	a.T.Helper()
	return a.OK("POST", "/v1/loyalties/"+campaign+"/members", map[string]any{
		"customer": map[string]any{"source_id": sourceID, "name": "Member " + sourceID}})
}

// History is a card's transactions, oldest first.
func (a API) History(code string) []map[string]any {
	a.T.Helper()
	return a.data("/v1/loyalties/members/" + code + "/transactions?order=id&limit=100")
}

// Pending is a card's pending point entries.
func (a API) Pending(code string) []map[string]any {
	a.T.Helper()
	return a.data("/v1/loyalties/members/" + code + "/pending-points?limit=100")
}

func (a API) data(path string) []map[string]any {
	a.T.Helper()
	var out []map[string]any
	for _, d := range a.OK("GET", path, nil)["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

var txFields = []string{"id", "source_id", "voucher_id", "campaign_id", "source", "reason", "type", "details",
	"related_transaction_id", "created_at"}

// CheckTx checks that every field of the transaction table is present and
// that details hold exactly the sub-objects its type carries.
func CheckTx(t testing.TB, tx map[string]any, typ string, details ...string) {
	t.Helper()
	for _, f := range txFields {
		if _, ok := tx[f]; !ok {
			t.Fatalf("transaction lacks %s: %v", f, tx)
		}
	}
	if len(tx) != len(txFields) {
		t.Fatalf("transaction has fields beyond the table: %v", tx)
	}
	if tx["type"] != typ || !strings.HasPrefix(tx["id"].(string), "vtx_") {
		t.Fatalf("type %v id %v, want %s", tx["type"], tx["id"], typ)
	}
	var got []string
	for k := range tx["details"].(map[string]any) {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(details)
	if strings.Join(got, ",") != strings.Join(details, ",") {
		t.Fatalf("%s details %v, want %v", typ, got, details)
	}
	b := tx["details"].(map[string]any)["balance"].(map[string]any)
	for _, f := range []string{"type", "total", "object", "points", "balance", "related_object"} {
		if _, ok := b[f]; !ok {
			t.Fatalf("balance lacks %s: %v", f, b)
		}
	}
}
