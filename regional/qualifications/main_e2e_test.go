package qualifications_test

import (
	"fmt"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func voucher(a stacktest.API, code string, body map[string]any) map[string]any {
	a.T.Helper()
	if body["type"] == nil {
		body["type"] = "DISCOUNT_VOUCHER"
	}
	return a.OK("POST", "/v1/vouchers/"+code, body)
}

func percent(p float64) map[string]any {
	return map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": p}}
}

func orderOf(lines ...[2]int) map[string]any {
	var items []any
	for i, l := range lines {
		items = append(items, map[string]any{"product_id": fmt.Sprintf("prod_%d", i), "price": l[0], "quantity": l[1]})
	}
	return map[string]any{"items": items}
}

func num(v any) int64 { f, _ := v.(float64); return int64(f) }
