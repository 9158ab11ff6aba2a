package calc

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
)

// An order view writes itself as encoding/json writes it, whichever of
// its optional members it holds, alone and inside an answer's map.
func TestOrderViewAppendsAsEncodingJSON(t *testing.T) {
	s, n := "ord_1 <&>", int64(3)
	at := jsonx.Time{Time: time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)}
	views := []*OrderView{nil, {}, {Object: "order", Items: []ItemView{}}, {
		ID: &s, SourceID: &s, Status: &s, Amount: 100, InitialAmount: -5, DiscountAmount: 1 << 40, TotalAmount: 7,
		Metadata: map[string]any{"b": []any{1.5, "é"}, "a": nil}, CustomerID: &s, CreatedAt: &at, Object: "order",
		Items: []ItemView{{}, {ProductID: "prod_1", SKUID: "sku_1", SourceID: "src \"q\"", RelatedObject: "sku", Quantity: 2,
			InitialQuantity: 1, Amount: 300, InitialAmount: 300, Price: 150, DiscountAmount: 10, AppliedDiscountAmount: 10,
			SubtotalAmount: 290, AppliedQuantity: &n, AppliedQuantityAmount: &n, Product: map[string]any{"id": "prod_1"},
			SKU: (*string)(nil), Metadata: map[string]any{}, Object: "order_item"}, {Metadata: map[string]any{"x": 1}}},
	}}
	for i, v := range views {
		for _, x := range []any{v, map[string]any{"order": v, "list": []any{v}}} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(x); err != nil {
				t.Fatal(err)
			}
			got, err := jsonx.Append(nil, x)
			if err != nil || !bytes.Equal(append(got, '\n'), want.Bytes()) {
				t.Errorf("%d: Append %s (%v)\nencoding/json %s", i, got, err, want.Bytes())
			}
		}
	}
}
