package collections_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// catalogue makes a shirt (with SKUs red and blue), a hat and a mug.
func catalogue(a stacktest.API) map[string]string {
	ids := map[string]string{}
	for _, p := range []struct {
		src   string
		price int
		meta  map[string]any
	}{{"shirt", 2000, map[string]any{"season": "summer"}}, {"hat", 1500, map[string]any{"season": "winter"}}, {"mug", 800, nil}} {
		body := map[string]any{"name": p.src, "source_id": p.src, "price": p.price}
		if p.meta != nil {
			body["metadata"] = p.meta
		}
		ids[p.src] = a.OK("POST", "/v1/products", body)["id"].(string)
	}
	for _, s := range []string{"red", "blue"} {
		ids[s] = a.OK("POST", "/v1/products/"+ids["shirt"]+"/skus", map[string]any{"sku": s, "source_id": "shirt-" + s, "price": 2100})["id"].(string)
	}
	return ids
}

func TestStaticCollectionsCreateListDelete(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ids := catalogue(a)
	c := a.OK("POST", "/v1/product-collections", map[string]any{"type": "STATIC", "name": "Summer",
		"products": []any{map[string]any{"id": ids["hat"], "object": "product"}, map[string]any{"id": ids["blue"], "object": "sku"}}})
	id, _ := c["id"].(string)
	items, _ := c["products"].([]any)
	if !strings.HasPrefix(id, "pc_") || c["object"] != "products_collection" || c["type"] != "STATIC" || len(items) != 2 ||
		items[1].(map[string]any)["product_id"] != ids["shirt"] {
		t.Fatalf("created: %v", c)
	}
	if got := a.OK("GET", "/v1/product-collections/"+id, nil); fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("read back %v, created %v", got, c)
	}
	// Without a type, a collection is static.
	a.OK("POST", "/v1/product-collections", map[string]any{"name": "Mugs", "products": []any{map[string]any{"id": ids["mug"], "object": "product"}}})
	l := a.OK("GET", "/v1/product-collections?limit=1", nil)
	if l["total"] != 2.0 || len(l["data"].([]any)) != 1 || l["data"].([]any)[0].(map[string]any)["name"] != "Mugs" || l["data_ref"] != "data" {
		t.Fatalf("the list, newest first: %v", l)
	}
	if l = a.OK("GET", "/v1/product-collections?limit=1&page=2", nil); l["data"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("page 2: %v", l)
	}
	p := a.OK("GET", "/v1/product-collections/"+id+"/products", nil)
	data := p["data"].([]any)
	if p["total"] != 2.0 || len(data) != 2 || data[0].(map[string]any)["object"] != "product" || data[0].(map[string]any)["id"] != ids["hat"] ||
		data[1].(map[string]any)["object"] != "sku" || data[1].(map[string]any)["product"].(map[string]any)["id"] != ids["shirt"] {
		t.Fatalf("its products, oldest first: %v", p)
	}
	if p = a.OK("GET", "/v1/product-collections/"+id+"/products?limit=1&page=2", nil); p["data"].([]any)[0].(map[string]any)["id"] != ids["blue"] {
		t.Fatalf("its products, page 2: %v", p)
	}
	if p = a.OK("GET", "/v1/product-collections/"+id+"/products?starting_after="+data[0].(map[string]any)["created_at"].(string), nil); p["total"] != 1.0 {
		t.Fatalf("created after the hat: %v", p)
	}

	for _, b := range []map[string]any{{}, {"name": " "}, {"name": "x", "type": "SMART"},
		{"name": "x", "products": []any{map[string]any{"id": ids["hat"], "object": "category"}}},
		{"name": "x", "products": []any{map[string]any{"object": "product"}}},
		{"name": "x", "products": []any{map[string]any{"id": ids["blue"], "object": "sku", "product_id": ids["hat"]}}},
		{"name": "x", "products": []any{map[string]any{"id": ids["hat"], "object": "product"}, map[string]any{"id": ids["hat"], "object": "product"}}},
		{"name": "x", "type": "STATIC", "filter": map[string]any{"junction": "and"}},
		{"name": "x", "type": "AUTO_UPDATE"},
		{"name": "x", "type": "AUTO_UPDATE", "filter": map[string]any{"colour": map[string]any{"conditions": map[string]any{"$is": []any{"red"}}}}},
		{"name": "x", "type": "AUTO_UPDATE", "filter": map[string]any{"price": map[string]any{"conditions": map[string]any{"$more_than": []any{"cheap"}}}}},
		{"name": "x", "type": "AUTO_UPDATE", "filter": map[string]any{"price": map[string]any{"conditions": map[string]any{"$after": []any{"2024-01-01"}}}}},
		{"name": "x", "type": "AUTO_UPDATE", "products": []any{}, "filter": map[string]any{"junction": "and"}}} {
		a.Fails("POST", "/v1/product-collections", b, http.StatusBadRequest, "invalid_payload")
	}
	a.Fails("POST", "/v1/product-collections", map[string]any{"name": "x", "products": []any{map[string]any{"id": "prod_nope", "object": "product"}}},
		http.StatusNotFound, "not_found")
	a.Fails("POST", "/v1/product-collections", map[string]any{"name": "Summer"}, http.StatusConflict, "duplicate_found")
	a.Fails("GET", "/v1/product-collections?order=code", nil, http.StatusBadRequest, "invalid_query_params")
	a.Fails("GET", "/v1/product-collections/"+id+"/products?order=-created_at", nil, http.StatusBadRequest, "invalid_query_params")
	a.Fails("GET", "/v1/product-collections/"+id+"/products?starting_after=yesterday", nil, http.StatusBadRequest, "invalid_query_params")

	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.Fails("GET", "/v1/product-collections/"+id, nil, http.StatusNotFound, "not_found")
	other.Fails("GET", "/v1/product-collections/"+id+"/products", nil, http.StatusNotFound, "not_found")
	other.Fails("DELETE", "/v1/product-collections/"+id, nil, http.StatusNotFound, "not_found")
	other.Fails("POST", "/v1/product-collections", map[string]any{"name": "x", "products": []any{map[string]any{"id": ids["hat"], "object": "product"}}},
		http.StatusNotFound, "not_found")

	if r := a.Do("DELETE", "/v1/product-collections/"+id, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/product-collections/"+id, nil, http.StatusNotFound, "not_found")
}

// A collection in a validation rule's applicable_to limits the discount to
// the lines in it, whether a line names its product by id or source_id or
// is a SKU of a listed product; order.items.any of a collection asks for
// one such line.
func TestCollectionInApplicableToAndItemsRules(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ids := catalogue(a)
	coll := a.OK("POST", "/v1/product-collections", map[string]any{"name": "Clothes",
		"products": []any{map[string]any{"id": ids["shirt"], "object": "product"}, map[string]any{"id": ids["hat"], "object": "product"}}})["id"].(string)
	v := a.Voucher("CLOTHES", map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": 50, "effect": "APPLY_TO_ITEMS"}})
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "clothes only", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.items.any", "conditions": map[string]any{
			"$is": []any{map[string]any{"object": "products_collection", "id": coll}}}, "error": map[string]any{"message": "Buy clothes."}}, "logic": "1"},
		"applicable_to": map[string]any{"included": []any{map[string]any{"object": "products_collection", "id": coll, "effect": "APPLY_TO_EVERY"}}}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})

	validate := func(items ...map[string]any) map[string]any {
		t.Helper()
		var list []any
		for _, it := range items {
			list = append(list, it)
		}
		return a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "CLOTHES"}},
			"order": map[string]any{"items": list}})
	}
	line := func(key, ref string, price int) map[string]any {
		if key == "source_id" {
			return map[string]any{"source_id": ref, "related_object": "product", "price": price, "quantity": 1}
		}
		return map[string]any{key: ref, "price": price, "quantity": 1}
	}
	// The mug is not in it: half off the shirt (by source_id) and the hat
	// (by id) only.
	r := validate(line("source_id", "shirt", 2000), line("product_id", ids["hat"], 1000), line("product_id", ids["mug"], 800))
	if r["valid"] != true || stacktest.Num(r["order"].(map[string]any)["items_discount_amount"]) != 1500 {
		t.Fatalf("two lines of three in the collection: %v", r)
	}
	// A SKU of a listed product is in it.
	if r = validate(line("sku_id", ids["red"], 2100)); r["valid"] != true || stacktest.Num(r["order"].(map[string]any)["items_discount_amount"]) != 1050 {
		t.Fatalf("a SKU of the shirt: %v", r)
	}
	// Lines named by product id only: the collection's list alone decides.
	if r = validate(line("product_id", ids["hat"], 1000), line("product_id", ids["mug"], 800)); r["valid"] != true ||
		stacktest.Num(r["order"].(map[string]any)["items_discount_amount"]) != 500 {
		t.Fatalf("the hat by id: %v", r)
	}
	// Only a mug: no line in the collection.
	if r = validate(line("product_id", ids["mug"], 800)); r["valid"] != false {
		t.Fatalf("only a mug: %v", r)
	}
	// A deleted collection holds nothing.
	a.Do("DELETE", "/v1/product-collections/"+coll, nil)
	if r = validate(line("product_id", ids["hat"], 1000)); r["valid"] != false {
		t.Fatalf("after the collection's deletion: %v", r)
	}
}

// An AUTO_UPDATE collection holds the products, and the SKUs, its filter
// holds: the same whether listed (its products, an SQL condition over the
// catalogue) or met in an order (a rule's applicable_to, the filter read
// in Go on the lines' products and SKUs), for every kind of path.
func TestDynamicCollectionsListWhatValidationHolds(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ids := catalogue(a) // shirt 2000 summer (SKUs red, blue at 2100), hat 1500 winter, mug 800
	ids["lamp"] = a.OK("POST", "/v1/products", map[string]any{"name": "Lamp", "source_id": "lamp",
		"metadata": map[string]any{"season": "Summer", "weight": 2.5, "since": "2024-05-01"}})["id"].(string) // no price
	ids["green"] = a.OK("POST", "/v1/products/"+ids["shirt"]+"/skus", map[string]any{"sku": "green", "source_id": "shirt-green",
		"price": 900, "metadata": map[string]any{"season": "summer"}})["id"].(string)
	names := map[string]string{}
	for k, v := range ids {
		names[v] = k
	}
	lines := []any{}
	for _, k := range []string{"shirt", "hat", "mug", "lamp"} {
		lines = append(lines, map[string]any{"product_id": ids[k], "price": 1000, "quantity": 1})
	}
	for _, k := range []string{"red", "blue", "green"} {
		lines = append(lines, map[string]any{"sku_id": ids[k], "price": 1000, "quantity": 1})
	}
	lineName := []string{"shirt", "hat", "mug", "lamp", "red", "blue", "green"}
	for i, tc := range []struct {
		filter string
		want   string
	}{
		{`{"junction": "and", "price": {"conditions": {"$more_than": [1000]}}}`, "blue hat red shirt"},
		{`{"price": {"conditions": {"$less_than_equal": [900]}}}`, "green mug"},
		{`{"price": {"conditions": {"$is": [2100]}}}`, "blue red"},
		{`{"price": {"conditions": {"$is_unknown": []}}}`, "lamp"},
		{`{"metadata.season": {"conditions": {"$is": ["summer"]}}}`, "green shirt"},
		{`{"metadata.season": {"conditions": {"$is_not": ["summer"]}}}`, "blue hat lamp mug red"},
		{`{"junction": "or", "name": {"conditions": {"$starts_with": ["h", "L"]}}, "metadata.weight": {"conditions": {"$more_than": [2]}}}`, "hat lamp"},
		{`{"source_id": {"conditions": {"$contains": ["shirt"]}}}`, "blue green red shirt"},
		{`{"metadata.since": {"conditions": {"$before": ["2025-01-01"]}}, "created_at": {"conditions": {"$less_than_ago": [1]}}}`, "lamp"},
	} {
		coll := a.OK("POST", "/v1/product-collections", map[string]any{"type": "AUTO_UPDATE", "name": fmt.Sprintf("Dynamic %d", i),
			"filter": json.RawMessage(tc.filter)})
		if coll["type"] != "AUTO_UPDATE" || coll["filter"] == nil || coll["products"] != nil {
			t.Fatalf("created: %v", coll)
		}
		var listed []string
		for _, x := range a.OK("GET", "/v1/product-collections/"+coll["id"].(string)+"/products?limit=100", nil)["data"].([]any) {
			listed = append(listed, names[x.(map[string]any)["id"].(string)])
		}
		sort.Strings(listed)
		code := fmt.Sprintf("DYN-%d", i)
		v := a.Voucher(code, map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": 50, "effect": "APPLY_TO_ITEMS"}})
		rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": code, "type": "advanced",
			"applicable_to": map[string]any{"included": []any{map[string]any{"object": "products_collection", "id": coll["id"], "effect": "APPLY_TO_EVERY"}}}})
		a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
		r := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"order": map[string]any{"items": lines}})
		var held []string
		if items, ok := r["order"].(map[string]any)["items"].([]any); ok {
			for j, it := range items {
				if stacktest.Num(it.(map[string]any)["discount_amount"]) > 0 {
					held = append(held, lineName[j])
				}
			}
		}
		sort.Strings(held)
		if strings.Join(listed, " ") != tc.want || strings.Join(held, " ") != tc.want {
			t.Errorf("%s: listed %v, held in an order %v; want %s", tc.filter, listed, held, tc.want)
		}
	}
}
