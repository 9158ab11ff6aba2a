package collections_test

import (
	"fmt"
	"net/http"
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
		{"name": "x", "type": "AUTO_UPDATE"}} {
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
