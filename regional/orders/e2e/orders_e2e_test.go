package e2e_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// ids lists the orders of a page, in its order.
func ids(l map[string]any) []string {
	var out []string
	for _, o := range l["orders"].([]any) {
		out = append(out, o.(map[string]any)["id"].(string))
	}
	return out
}

func TestOrdersThroughTheRouter(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.order.paid")
	// as binds the project's client to a subtest, so that a failed call
	// stops that subtest.
	as := func(t *testing.T) stacktest.API { return stacktest.API{T: t, E: a.E, P: a.P} }

	t.Run("a refused write says which field is wrong and stores nothing", func(t *testing.T) {
		for _, c := range []struct {
			name string
			body map[string]any
			want string
		}{
			{"unknown status", map[string]any{"source_id": "bad-1", "status": "SHIPPED"}, "status"},
			{"negative amount", map[string]any{"source_id": "bad-2", "amount": -1}, "amount"},
			{"discount over amount", map[string]any{"source_id": "bad-3", "amount": 10, "discount_amount": 11}, "discount_amount"},
			{"fractional item price", map[string]any{"source_id": "bad-4", "items": []any{map[string]any{"price": 1.5}}}, "items[0].price"},
			{"a customer_id of no customer", map[string]any{"source_id": "bad-5", "customer_id": "cust_nope"}, ""},
			{"a referrer_id of no customer", map[string]any{"source_id": "bad-6", "referrer_id": "cust_nope"}, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				a := as(t)
				if c.want == "" {
					a.Fails("POST", "/v1/orders", c.body, 404, "not_found")
				} else if e := a.Fails("POST", "/v1/orders", c.body, 400, "invalid_payload"); !strings.Contains(e["details"].(string), c.want) {
					t.Fatalf("error %v does not name %s", e, c.want)
				}
				a.Fails("GET", "/v1/orders/"+c.body["source_id"].(string), nil, 404, "not_found")
			})
		}
	})

	var first map[string]any
	t.Run("an order reads back with its items' amounts and its totals", func(t *testing.T) {
		a := as(t)
		first = a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "discount_amount": 100, "metadata": map[string]any{"till": 3},
			"items": []any{map[string]any{"product_id": "prod_a", "quantity": 2, "price": 250, "related_object": "product"},
				map[string]any{"sku_id": "sku_b", "amount": 300, "related_object": "sku"}},
			"customer": map[string]any{"source_id": "ann", "name": "Ann"}})
		items := first["items"].([]any)
		if !strings.HasPrefix(first["id"].(string), "ord_") || first["object"] != "order" || first["status"] != "CREATED" ||
			first["amount"] != 800.0 || first["discount_amount"] != 100.0 || first["total_amount"] != 700.0 ||
			first["total_discount_amount"] != 100.0 || items[0].(map[string]any)["amount"] != 500.0 ||
			items[0].(map[string]any)["object"] != "order_item" || first["updated_at"] != nil || first["created_at"] == nil ||
			first["metadata"].(map[string]any)["till"] != 3.0 {
			t.Fatalf("order: %v", first)
		}
		cust := a.OK("GET", "/v1/customers/ann", nil)
		if first["customer_id"] != cust["id"] || first["customer"].(map[string]any)["id"] != cust["id"] {
			t.Fatalf("the order's customer %v, want the one its customer object made, %v", first["customer"], cust["id"])
		}
		for _, ref := range []string{first["id"].(string), "o-1"} {
			if g := a.OK("GET", "/v1/orders/"+ref, nil); g["id"] != first["id"] || g["total_amount"] != 700.0 {
				t.Fatalf("get %s: %v", ref, g)
			}
		}
	})

	t.Run("a second POST with the source_id updates the same order, keeping what it leaves out", func(t *testing.T) {
		a := as(t)
		o := a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "amount": 900})
		if o["id"] != first["id"] || o["amount"] != 900.0 || o["discount_amount"] != 100.0 || o["total_amount"] != 800.0 ||
			len(o["items"].([]any)) != 2 || o["customer_id"] != first["customer_id"] || o["updated_at"] == nil ||
			o["created_at"] != first["created_at"] {
			t.Fatalf("upsert: %v", o)
		}
		if o := a.OK("POST", "/v1/orders", map[string]any{"id": first["id"], "metadata": map[string]any{"till": 4}}); o["id"] != first["id"] ||
			o["metadata"].(map[string]any)["till"] != 4.0 {
			t.Fatalf("upsert by id: %v", o)
		}
		a.Fails("POST", "/v1/orders", map[string]any{"id": "ord_nope"}, 404, "not_found")
		a.Fails("POST", "/v1/orders", map[string]any{"source_id": "o-1", "amount": 50}, 400, "invalid_payload") // under its discount
	})

	t.Run("PUT changes the order it names, by id or source id", func(t *testing.T) {
		a := as(t)
		o := a.OK("PUT", "/v1/orders/o-1", map[string]any{"status": "FULFILLED"})
		if o["id"] != first["id"] || o["status"] != "FULFILLED" || o["amount"] != 900.0 {
			t.Fatalf("put: %v", o)
		}
		a.Fails("PUT", "/v1/orders/o-nope", map[string]any{"status": "PAID"}, 404, "not_found")
		a.Fails("PUT", "/v1/orders/o-1", map[string]any{"status": "paid"}, 400, "invalid_payload")
	})

	t.Run("becoming PAID raises customer.order.paid once", func(t *testing.T) {
		a := as(t)
		o := a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-paid", "amount": 1000, "status": "PAID",
			"customer": map[string]any{"source_id": "ann"}})
		ev := hooks.Wait(t, "customer.order.paid", 1)
		if ev["order"].(map[string]any)["id"] != o["id"] || ev["order"].(map[string]any)["status"] != "PAID" {
			t.Fatalf("event: %v", ev)
		}
		// PAID again, and another change while PAID: nothing more.
		a.OK("PUT", "/v1/orders/o-paid", map[string]any{"status": "PAID", "metadata": map[string]any{"x": 1}})
		a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-plain", "amount": 10})
		// Leaving PAID and coming back is another payment.
		a.OK("PUT", "/v1/orders/o-paid", map[string]any{"status": "CANCELED"})
		a.OK("PUT", "/v1/orders/o-paid", map[string]any{"status": "PAID"})
		hooks.Wait(t, "customer.order.paid", 2)
		if n := hooks.Count("customer.order.paid"); n != 2 {
			t.Fatalf("%d customer.order.paid events, want 2", n)
		}
	})

	t.Run("the list is newest first, paged, with the total", func(t *testing.T) {
		a := as(t)
		all := a.OK("GET", "/v1/orders?limit=100", nil)
		got := ids(all)
		if all["total"] != 3.0 || len(got) != 3 || all["data_ref"] != "orders" || got[2] != first["id"] {
			t.Fatalf("list: %v", all)
		}
		p1 := a.OK("GET", "/v1/orders?limit=2", nil)
		p2 := a.OK("GET", "/v1/orders?limit=2&starting_after_id="+p1["more_starting_after"].(string), nil)
		if p1["has_more"] != true || p2["has_more"] != false || strings.Join(append(ids(p1), ids(p2)...), ",") != strings.Join(got, ",") {
			t.Fatalf("pages %v then %v, want %v", ids(p1), ids(p2), got)
		}
		asc := ids(a.OK("GET", "/v1/orders?order=created_at", nil))
		if asc[0] != first["id"] || asc[2] != got[0] {
			t.Fatalf("oldest first: %v", asc)
		}
		// Updated last is o-paid; o-plain was never updated, so it is last by its creation.
		if up := ids(a.OK("GET", "/v1/orders?order=-updated_at", nil)); up[0] != got[1] {
			t.Fatalf("by updated_at: %v, want o-paid first (%v)", up, got)
		}
		a.Fails("GET", "/v1/orders?order=amount", nil, 400, "invalid_query_params")
	})

	t.Run("another project sees none of it", func(t *testing.T) {
		a := as(t)
		other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
		other.Fails("GET", "/v1/orders/o-1", nil, 404, "not_found")
		other.Fails("GET", "/v1/orders/"+first["id"].(string), nil, 404, "not_found")
		if l := other.OK("GET", "/v1/orders", nil); l["total"] != 0.0 {
			t.Fatalf("other project's list: %v", l)
		}
		// The same source id in another project is another order.
		if o := other.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1"}); o["id"] == first["id"] {
			t.Fatalf("another project's o-1 is this one's: %v", o)
		}
	})
}
