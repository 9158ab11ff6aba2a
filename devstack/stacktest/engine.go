package stacktest

import "fmt"

// The promotion engine's tests, in regional/engine, qualifications and
// promotions, build the same few requests.

// Voucher creates the voucher code with body, a discount voucher unless
// body names a type.
func (a API) Voucher(code string, body map[string]any) map[string]any {
	a.T.Helper()
	if body["type"] == nil {
		body["type"] = "DISCOUNT_VOUCHER"
	}
	return a.OK("POST", "/v1/vouchers/"+code, body)
}

// PercentOff is a voucher body's percent discount.
func PercentOff(p float64) map[string]any {
	return map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": p}}
}

// Order is an order of lines, each a price and a quantity of a product of
// its own (prod_0, prod_1, …).
func Order(lines ...[2]int) map[string]any {
	var items []any
	for i, l := range lines {
		items = append(items, map[string]any{"product_id": fmt.Sprintf("prod_%d", i), "price": l[0], "quantity": l[1]})
	}
	return map[string]any{"items": items}
}

// Num is a JSON number of an answer as a whole number; 0 if it is none.
func Num(v any) int64 { f, _ := v.(float64); return int64(f) }
