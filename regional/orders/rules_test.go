package orders

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
)

func n(v int64) *int64   { return &v }
func s(v string) *string { return &v }

// wantPayloadError fails t unless err is a 400 invalid_payload whose
// message names want: a refusal must say which field is wrong.
func wantPayloadError(t *testing.T, err error, want string) {
	t.Helper()
	var e *apierr.Error
	if err == nil {
		t.Fatalf("accepted, want a 400 naming %q", want)
	}
	if !errors.As(err, &e) || e.Status != 400 || e.Key != "invalid_payload" || !strings.Contains(e.Details, want) {
		t.Fatalf("error %v, want a 400 invalid_payload naming %q", err, want)
	}
}

// What an order write refuses, before it reaches the store: each refusal
// names the field.
func TestARequestIsRefusedNamingTheField(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Request
		want string
	}{
		{"an unknown status", Request{Status: s("SHIPPED")}, "status must be one of"},
		{"a lower-case status", Request{Status: s("paid")}, "status must be one of"},
		{"an empty source_id", Request{SourceID: s("")}, "source_id"},
		{"a source_id over 300 characters", Request{SourceID: s(strings.Repeat("x", 301))}, "source_id"},
		{"a NUL in customer_id", Request{CustomerID: s("a\x00b")}, "customer_id"},
		{"an empty referrer_id", Request{ReferrerID: s("")}, "referrer_id"},
		{"a negative amount", Request{Amount: n(-1)}, "amount"},
		{"an amount that cannot be stored with room for its sums", Request{Amount: n(1 << 62)}, "amount"},
		{"a negative initial_amount", Request{InitialAmount: n(-5)}, "initial_amount"},
		{"a negative discount_amount", Request{DiscountAmount: n(-5)}, "discount_amount"},
		{"a discount over the amount", Request{Amount: n(100), DiscountAmount: n(101)}, "discount_amount must not exceed amount"},
		{"an item's negative quantity", Request{Items: []map[string]any{{"quantity": -1.0}}}, "items[0].quantity"},
		{"an item's fractional price", Request{Items: []map[string]any{{"price": 1.5}}}, "items[0].price"},
		{"an item's amount as text", Request{Items: []map[string]any{{"amount": "10"}}}, "items[0].amount"},
		{"an item's amount over 1e15", Request{Items: []map[string]any{{"amount": 2e15}}}, "items[0].amount"},
		{"the second item's bad quantity", Request{Items: []map[string]any{{"quantity": 1.0}, {"quantity": 0.5}}}, "items[1].quantity"},
		{"an item related to a campaign", Request{Items: []map[string]any{{"related_object": "campaign"}}}, "items[0].related_object"},
		{"quantity × price past 1e15", Request{Items: []map[string]any{{"quantity": 1e8, "price": 1e8}}}, "quantity × price"},
		{"more than 500 items", Request{Items: make([]map[string]any, 501)}, "at most 500 items"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Order{Status: "CREATED"}
			wantPayloadError(t, apply(&o, c.r), c.want)
		})
	}
}

// What an accepted write leaves on the order: what the request names
// changes, what it leaves out stays.
func TestARequestChangesOnlyWhatItNames(t *testing.T) {
	stored := func() Order {
		return Order{ID: "ord_1", Status: "CREATED", SourceID: s("src"), Amount: n(1000), DiscountAmount: n(100),
			Metadata: map[string]any{"a": 1.0}, Items: []map[string]any{{"amount": int64(1000), "object": "order_item"}}}
	}
	for _, c := range []struct {
		name  string
		r     Request
		check func(t *testing.T, o Order)
	}{
		{"nothing named keeps everything", Request{}, func(t *testing.T, o Order) {
			if o.Status != "CREATED" || *o.SourceID != "src" || *o.Amount != 1000 || *o.DiscountAmount != 100 || o.Metadata["a"] != 1.0 || len(o.Items) != 1 {
				t.Fatalf("%+v", o)
			}
		}},
		{"each status is taken", Request{Status: s("FULFILLED")}, func(t *testing.T, o Order) {
			if o.Status != "FULFILLED" {
				t.Fatalf("status %s", o.Status)
			}
		}},
		{"any status follows any other: writes set no order of statuses", Request{Status: s("CANCELED")}, func(t *testing.T, o Order) {
			if o.Status != "CANCELED" {
				t.Fatalf("status %s", o.Status)
			}
		}},
		{"metadata is replaced, not merged", Request{Metadata: map[string]any{"b": 2.0}}, func(t *testing.T, o Order) {
			if _, ok := o.Metadata["a"]; ok || o.Metadata["b"] != 2.0 {
				t.Fatalf("metadata %v", o.Metadata)
			}
		}},
		{"items without an amount give the order its amount", Request{Items: []map[string]any{
			{"quantity": 2.0, "price": 250.0}, {"amount": 300.0}}}, func(t *testing.T, o Order) {
			if *o.Amount != 800 || o.Items[0]["amount"] != int64(500) || o.Items[1]["amount"] != int64(300) {
				t.Fatalf("amount %d items %v", *o.Amount, o.Items)
			}
		}},
		{"a given amount wins over the items' sum", Request{Amount: n(50), DiscountAmount: n(0), Items: []map[string]any{{"amount": 300.0}}},
			func(t *testing.T, o Order) {
				if *o.Amount != 50 {
					t.Fatalf("amount %d", *o.Amount)
				}
			}},
		{"items with no amounts leave the amount alone", Request{Items: []map[string]any{{"product_id": "prod_1"}}}, func(t *testing.T, o Order) {
			if *o.Amount != 1000 || len(o.Items) != 1 || o.Items[0]["object"] != "order_item" {
				t.Fatalf("amount %d items %v", *o.Amount, o.Items)
			}
		}},
		{"an empty item list empties the items", Request{Items: []map[string]any{}}, func(t *testing.T, o Order) {
			if len(o.Items) != 0 || *o.Amount != 1000 {
				t.Fatalf("amount %d items %v", *o.Amount, o.Items)
			}
		}},
		{"a discount equal to the amount is taken", Request{DiscountAmount: n(1000)}, func(t *testing.T, o Order) {
			if *o.DiscountAmount != 1000 || *o.TotalAmount() != 0 {
				t.Fatalf("%+v", o)
			}
		}},
		{"a lower amount still over the discount is taken", Request{Amount: n(500)}, func(t *testing.T, o Order) {
			if *o.Amount != 500 {
				t.Fatalf("amount %d", *o.Amount)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := stored()
			if err := apply(&o, c.r); err != nil {
				t.Fatal(err)
			}
			c.check(t, o)
		})
	}
	t.Run("a lower amount than the stored discount is refused", func(t *testing.T) {
		o := stored()
		wantPayloadError(t, apply(&o, Request{Amount: n(99)}), "discount_amount must not exceed amount")
	})
}

// An item reads back with integers (whatever number type it came as),
// object order_item, and its line amount when price and quantity are given.
func TestItemsAreNormalized(t *testing.T) {
	for _, c := range []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"price × quantity", map[string]any{"quantity": 3.0, "price": 199.0},
			map[string]any{"quantity": int64(3), "price": int64(199), "amount": int64(597), "object": "order_item"}},
		{"a given amount stays", map[string]any{"quantity": 3.0, "price": 199.0, "amount": 500.0},
			map[string]any{"quantity": int64(3), "price": int64(199), "amount": int64(500), "object": "order_item"}},
		{"a json.Number", map[string]any{"amount": json.Number("42")},
			map[string]any{"amount": int64(42), "object": "order_item"}},
		{"an int64 the redemption engine recalculated", map[string]any{"amount": int64(7)},
			map[string]any{"amount": int64(7), "object": "order_item"}},
		{"a price alone has no amount", map[string]any{"price": 10.0},
			map[string]any{"price": int64(10), "object": "order_item"}},
		{"a zero price makes a zero amount", map[string]any{"quantity": 1e9, "price": 0.0},
			map[string]any{"quantity": int64(1e9), "price": int64(0), "amount": int64(0), "object": "order_item"}},
		{"nulls stay null", map[string]any{"quantity": nil, "sku_id": "sku_1", "related_object": "sku"},
			map[string]any{"quantity": nil, "sku_id": "sku_1", "related_object": "sku", "object": "order_item"}},
		{"the client's object is overwritten", map[string]any{"object": "thing"}, map[string]any{"object": "order_item"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizeItems([]map[string]any{c.in})
			if err != nil {
				t.Fatal(err)
			}
			if len(got[0]) != len(c.want) {
				t.Fatalf("item %v, want %v", got[0], c.want)
			}
			for k, v := range c.want {
				if g, ok := got[0][k]; !ok || g != v {
					t.Fatalf("item %v, want %v", got[0], c.want)
				}
			}
		})
	}
	t.Run("the caller's items are not changed", func(t *testing.T) {
		in := map[string]any{"quantity": 2.0, "price": 3.0}
		if _, err := NormalizeItems([]map[string]any{in}); err != nil {
			t.Fatal(err)
		}
		if len(in) != 2 || in["quantity"] != 2.0 {
			t.Fatalf("input changed: %v", in)
		}
	})
}

// An order reads back in the reference's OrderCalculated shape: totals
// computed from amount and discount, never-null collections, references
// to its customer and referrer only when it has them.
func TestAnOrderReadsBackInTheReferenceShape(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     Order
		check func(t *testing.T, v View)
	}{
		{"amount less discount", Order{ID: "ord_1", Status: "PAID", Amount: n(1000), DiscountAmount: n(250)}, func(t *testing.T, v View) {
			if *v.TotalAmount != 750 || *v.TotalDiscountAmount != 250 || *v.DiscountAmount != 250 || v.Object != "order" || v.Status != "PAID" {
				t.Fatalf("%+v", v)
			}
		}},
		{"no discount: the whole amount", Order{Amount: n(1000)}, func(t *testing.T, v View) {
			if *v.TotalAmount != 1000 || v.TotalDiscountAmount != nil {
				t.Fatalf("%+v", v)
			}
		}},
		{"no amount: no total", Order{DiscountAmount: n(5)}, func(t *testing.T, v View) {
			if v.TotalAmount != nil {
				t.Fatalf("total %d", *v.TotalAmount)
			}
		}},
		{"no items, metadata or redemptions read as empty, not null", Order{}, func(t *testing.T, v View) {
			b, _ := json.Marshal(v)
			for _, want := range []string{`"items":[]`, `"metadata":{}`, `"redemptions":{}`} {
				if !strings.Contains(string(b), want) {
					t.Fatalf("%s lacks %s", b, want)
				}
			}
			if strings.Contains(string(b), `"customer":`) || strings.Contains(string(b), `"referrer":`) {
				t.Fatalf("%s names a customer or referrer it has not", b)
			}
		}},
		{"customer and referrer as objects", Order{CustomerID: s("cust_1"), ReferrerID: s("cust_2")}, func(t *testing.T, v View) {
			if *v.Customer != (ObjectRef{ID: "cust_1", Object: "customer"}) || *v.Referrer != (ObjectRef{ID: "cust_2", Object: "customer"}) ||
				*v.CustomerID != "cust_1" || *v.ReferrerID != "cust_2" {
				t.Fatalf("%+v", v)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, c.o.View()) })
	}
}
