package calc

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tallyhq/tally/regional/orders"
)

// order is a request's order of lines (price, quantity) of products p0, p1…
func order(lines ...[2]int64) *orders.Request {
	o := &orders.Request{}
	for i, l := range lines {
		o.Items = append(o.Items, map[string]any{"product_id": "p" + string(rune('0'+i)), "price": l[0], "quantity": l[1],
			"amount": l[0] * l[1]})
	}
	return o
}

func disc(js string) Redeemable { return Redeemable{ID: "X", Discount: json.RawMessage(js)} }

func gift(balance int64, credits *int64) Redeemable {
	return Redeemable{ID: "G", Gift: &Gift{Balance: balance, Credits: credits}}
}

func only(r Redeemable, lines ...int) Redeemable { r.Lines = lines; return r }

// The recalculated order for each discount variant and effect, stacked,
// limited and rounded: the order's discount fields and each item's.
func TestRecalculation(t *testing.T) {
	three := int64(300)
	for _, c := range []struct {
		name        string
		o           *orders.Request
		cs          []Redeemable
		orderOff    int64   // discount_amount
		itemsOff    []int64 // each item's discount_amount
		total       int64   // total_amount
		amount      int64   // amount (grows when units are added)
		perDiscount []int64 // each redeemable's discount
	}{
		{"amount off the order", order([2]int64{1000, 2}, [2]int64{500, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":700}`)},
			700, []int64{0, 0}, 1800, 2500, []int64{700}},
		{"amount off more than the order", order([2]int64{300, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":1000,"effect":"APPLY_TO_ORDER"}`)},
			300, []int64{0}, 0, 300, []int64{300}},
		{"amount off each item", order([2]int64{1000, 2}, [2]int64{150, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":200,"effect":"APPLY_TO_ITEMS"}`)},
			0, []int64{200, 150}, 1800, 2150, []int64{350}},
		{"amount off each unit", order([2]int64{1000, 2}, [2]int64{150, 3}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":100,"effect":"APPLY_TO_ITEMS_BY_QUANTITY"}`)},
			0, []int64{200, 300}, 1950, 2450, []int64{500}},
		{"amount off items, aggregated limit", order([2]int64{1000, 2}, [2]int64{1000, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":600,"effect":"APPLY_TO_ITEMS","aggregated_amount_limit":1000}`)},
			0, []int64{600, 400}, 2000, 3000, []int64{1000}},
		{"amount split proportionally, odd cents", order([2]int64{100, 1}, [2]int64{100, 1}, [2]int64{100, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":100,"effect":"APPLY_TO_ITEMS_PROPORTIONALLY"}`)},
			0, []int64{34, 33, 33}, 200, 300, []int64{100}},
		{"amount split by quantity", order([2]int64{100, 3}, [2]int64{500, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":200,"effect":"APPLY_TO_ITEMS_PROPORTIONALLY_BY_QUANTITY"}`)},
			0, []int64{150, 50}, 600, 800, []int64{200}},
		{"percent of the order, half cent rounds up", order([2]int64{1005, 1}), []Redeemable{disc(`{"type":"PERCENT","percent_off":10}`)},
			101, []int64{0}, 904, 1005, []int64{101}},
		{"fractional percent exact", order([2]int64{1000, 1}), []Redeemable{disc(`{"type":"PERCENT","percent_off":12.5}`)},
			125, []int64{0}, 875, 1000, []int64{125}},
		{"percent with amount_limit", order([2]int64{10000, 1}), []Redeemable{disc(`{"type":"PERCENT","percent_off":50,"amount_limit":1500}`)},
			1500, []int64{0}, 8500, 10000, []int64{1500}},
		{"percent of admitted items", order([2]int64{1000, 1}, [2]int64{3000, 1}), []Redeemable{only(disc(`{"type":"PERCENT","percent_off":20,"effect":"APPLY_TO_ITEMS"}`), 1)},
			0, []int64{0, 600}, 3400, 4000, []int64{600}},
		{"fixed order total", order([2]int64{2500, 2}), []Redeemable{disc(`{"type":"FIXED","fixed_amount":3000}`)},
			2000, []int64{0}, 3000, 5000, []int64{2000}},
		{"fixed below the total: no effect", order([2]int64{2500, 1}), []Redeemable{disc(`{"type":"FIXED","fixed_amount":3000}`)},
			0, []int64{0}, 2500, 2500, []int64{0}},
		{"fixed unit price of items", order([2]int64{2500, 2}, [2]int64{800, 1}), []Redeemable{disc(`{"type":"FIXED","fixed_amount":1000,"effect":"APPLY_TO_ITEMS"}`)},
			0, []int64{3000, 0}, 2800, 5800, []int64{3000}},
		{"unit: missing units added and free", order([2]int64{400, 1}), []Redeemable{disc(`{"type":"UNIT","unit_off":3,"effect":"ADD_MISSING_ITEMS","unit_type":"p0","product":{"id":"p0"}}`)},
			0, []int64{1200}, 0, 1200, []int64{1200}},
		{"unit: new items", order([2]int64{400, 2}), []Redeemable{disc(`{"type":"UNIT","unit_off":1,"effect":"ADD_NEW_ITEMS","unit_type":"p0","product":{"id":"p0"}}`)},
			0, []int64{0, 400}, 800, 1200, []int64{400}},
		{"unit multiple", order([2]int64{400, 1}, [2]int64{250, 2}), []Redeemable{disc(`{"type":"UNIT","effect":"ADD_MANY_ITEMS","units":[` +
			`{"unit_off":1,"effect":"ADD_MISSING_ITEMS","unit_type":"a","product":{"id":"p0"}},{"unit_off":1,"effect":"ADD_MISSING_ITEMS","unit_type":"b","product":{"id":"p1"}}]}`)},
			0, []int64{400, 250}, 250, 900, []int64{650}},
		{"gift credits the remaining total", order([2]int64{1000, 1}), []Redeemable{disc(`{"type":"AMOUNT","amount_off":200}`), gift(5000, nil)},
			1000, []int64{0}, 0, 1000, []int64{200, 800}},
		{"gift credits as asked", order([2]int64{1000, 1}), []Redeemable{gift(5000, &three)},
			300, []int64{0}, 700, 1000, []int64{300}},
		{"stacked: items then order percent of what is left", order([2]int64{1000, 1}, [2]int64{1000, 1}), []Redeemable{
			disc(`{"type":"AMOUNT","amount_off":500,"effect":"APPLY_TO_ITEMS"}`), disc(`{"type":"PERCENT","percent_off":10}`)},
			100, []int64{500, 500}, 900, 2000, []int64{1000, 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, effects, _, err := Apply(context.Background(), nil, "p", c.o, c.cs, Options{Views: true, Limit: len(c.cs)})
			if err != nil {
				t.Fatal(err)
			}
			if out.DiscountAmount != c.orderOff || out.TotalAmount != c.total || out.Amount != c.amount {
				t.Errorf("order: discount %v total %v amount %v; want %d %d %d", out.DiscountAmount, out.TotalAmount,
					out.Amount, c.orderOff, c.total, c.amount)
			}
			var sum int64
			for i, want := range c.itemsOff {
				got := out.Items[i].DiscountAmount
				sum += got
				if got != want {
					t.Errorf("item %d: discount %d, want %d", i, got, want)
				}
			}
			if out.ItemsDiscountAmount != sum || out.TotalDiscountAmount != sum+c.orderOff {
				t.Errorf("sums: %v %v", out.ItemsDiscountAmount, out.TotalDiscountAmount)
			}
			for i, want := range c.perDiscount {
				if effects[i].Discount != want || effects[i].NoEffect != (want == 0) {
					t.Errorf("redeemable %d: %d (no effect %v), want %d", i, effects[i].Discount, effects[i].NoEffect, want)
				}
				if od := effects[i].Order.TotalAppliedDiscountAmount; od != want {
					t.Errorf("redeemable %d's order: applied %v, want %d", i, od, want)
				}
			}
		})
	}
}

func TestRoundingHalfAwayFromZero(t *testing.T) {
	for _, c := range []struct {
		amount int64
		pct    string
		want   int64
	}{{15, "10", 2}, {14, "10", 1}, {25, "10", 3}, {1, "50", 1}, {999999999999999, "33.333", 333330000000000}, {3, "0.1", 0}} {
		if got := percentOf(c.amount, json.Number(c.pct)); got != c.want {
			t.Errorf("%s%% of %d: %d, want %d", c.pct, c.amount, got, c.want)
		}
	}
}

// The same stored discount is read once: the second effect's result holds
// the first's discount object (shared, read only), and its numbers apply
// as the first time; another discount's bytes are read anew.
func TestAStoredDiscountIsReadOnce(t *testing.T) {
	raw := `{"type":"AMOUNT","amount_off":250,"effect":"APPLY_TO_ORDER","x_read_once":1}`
	results := make([]map[string]any, 2)
	for i := range results {
		_, effects, _, err := Apply(context.Background(), nil, "proj", order([2]int64{1000, 1}), []Redeemable{disc(raw)}, Options{Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if effects[0].Discount != 250 {
			t.Fatalf("%d: discount %d, want 250", i, effects[0].Discount)
		}
		results[i] = effects[0].Result["discount"].(map[string]any)
	}
	if reflect.ValueOf(results[0]).UnsafePointer() != reflect.ValueOf(results[1]).UnsafePointer() {
		t.Fatal("the discount was read twice")
	}
	_, effects, _, err := Apply(context.Background(), nil, "proj", order([2]int64{1000, 1}),
		[]Redeemable{disc(`{"type":"AMOUNT","amount_off":300,"x_read_once":1}`)}, Options{Limit: 5})
	if err != nil || effects[0].Discount != 300 || effects[0].Result["discount"].(map[string]any)["amount_off"] != 300.0 {
		t.Fatalf("another discount: %+v %v", effects, err)
	}
}

// NoFinal renders each effect's order but not the order at the end.
func TestNoFinalRendersTheEffectsAlone(t *testing.T) {
	o := order([2]int64{1000, 1})
	final, effects, _, err := Apply(context.Background(), nil, "proj", o, []Redeemable{disc(`{"type":"AMOUNT","amount_off":100}`)},
		Options{Views: true, Limit: 1, NoFinal: true})
	if err != nil || final != nil || effects[0].Order == nil || effects[0].Order.TotalAmount != 900 {
		t.Fatalf("final %v, effects %+v, %v", final, effects, err)
	}
}
