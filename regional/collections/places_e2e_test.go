package collections_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// An AUTO_UPDATE collection whose filter is $in_location holds the
// products, and the SKUs, whose geopoint metadata lies in the location:
// listed (SQL by the location's bounding box, refined by the shape, paged
// after the refinement) and met in an order (the Go match) alike; a point
// in the box but outside the circle is in neither, and the location
// redrawn is in force at the next read.
func TestCollectionInLocation(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	shape := func(radius string) map[string]any {
		return map[string]any{"type": "circle", "distance": map[string]any{"center": "geo:48.85,2.35", "radius": radius}}
	}
	loc := a.OK("POST", "/v1/locations", map[string]any{"name": "Paris", "shape": shape("5 km")})["id"].(string)
	ids := map[string]string{}
	for _, p := range []struct{ src, at string }{
		{"kiosk", "geo:48.86,2.36"},
		{"depot", "geo:48.89,2.41"}, // in the circle's box, 6.2 km from its centre
		{"far", "geo:10,10"},
		{"nowhere", ""},
	} {
		body := map[string]any{"name": p.src, "source_id": p.src, "price": 1000}
		if p.at != "" {
			body["metadata"] = map[string]any{"store": p.at}
		}
		ids[p.src] = a.OK("POST", "/v1/products", body)["id"].(string)
	}
	// A SKU must hold the point itself: its product's is not read.
	ids["far-red"] = a.OK("POST", "/v1/products/"+ids["far"]+"/skus", map[string]any{"sku": "far-red", "price": 1000,
		"metadata": map[string]any{"store": "geo:48.851,2.349"}})["id"].(string)
	ids["kiosk-blue"] = a.OK("POST", "/v1/products/"+ids["kiosk"]+"/skus", map[string]any{"sku": "kiosk-blue", "price": 1000})["id"].(string)
	names := map[string]string{}
	for k, v := range ids {
		names[v] = k
	}
	coll := a.OK("POST", "/v1/product-collections", map[string]any{"type": "AUTO_UPDATE", "name": "In Paris",
		"filter": map[string]any{"junction": "and", "metadata.store": map[string]any{"conditions": map[string]any{"$in_location": []any{loc}}}}})
	collID := coll["id"].(string)
	if f, _ := coll["filter"].(map[string]any); f == nil || f["metadata.store"] == nil {
		t.Fatalf("created: %v", coll)
	}
	listed := func(query string) ([]string, int64) {
		t.Helper()
		l := a.OK("GET", "/v1/product-collections/"+collID+"/products"+query, nil)
		var out []string
		for _, x := range l["data"].([]any) {
			out = append(out, names[x.(map[string]any)["id"].(string)])
		}
		sort.Strings(out)
		return out, stacktest.Num(l["total"])
	}
	if got, total := listed("?limit=100"); !slices.Equal(got, []string{"far-red", "kiosk"}) || total != 2 {
		t.Fatalf("listed %v (total %v), want far-red and kiosk", got, total)
	}
	// Pages are cut after the refinement: one a page, two pages.
	p1, _ := listed("?limit=1&page=1")
	p2, total := listed("?limit=1&page=2")
	if len(p1) != 1 || len(p2) != 1 || p1[0] == p2[0] || total != 2 {
		t.Fatalf("pages %v and %v (total %v)", p1, p2, total)
	}

	// In an order: the lines in the collection take the discount.
	v := a.Voucher("PARIS", map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": 50, "effect": "APPLY_TO_ITEMS"}})
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Paris", "type": "advanced",
		"applicable_to": map[string]any{"included": []any{map[string]any{"object": "products_collection", "id": collID, "effect": "APPLY_TO_EVERY"}}}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	lineNames := []string{"kiosk", "depot", "far", "nowhere", "far-red", "kiosk-blue"}
	held := func() []string {
		t.Helper()
		var lines []any
		for _, k := range lineNames {
			key := "product_id"
			if k == "far-red" || k == "kiosk-blue" {
				key = "sku_id"
			}
			lines = append(lines, map[string]any{key: ids[k], "price": 1000, "quantity": 1})
		}
		r := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "PARIS"}},
			"order": map[string]any{"items": lines}})
		var out []string
		if items, ok := r["order"].(map[string]any)["items"].([]any); ok {
			for j, it := range items {
				if stacktest.Num(it.(map[string]any)["discount_amount"]) > 0 {
					out = append(out, lineNames[j])
				}
			}
		}
		sort.Strings(out)
		return out
	}
	if got := held(); !slices.Equal(got, []string{"far-red", "kiosk"}) {
		t.Fatalf("held in an order %v, want far-red and kiosk", got)
	}

	// The circle grown to 7 km takes the depot in, listed and in orders.
	a.OK("PUT", "/v1/locations/"+loc, map[string]any{"shape": shape("7 km")})
	stacktest.Eventually(t, 5*time.Second, "the grown circle", func() bool {
		got, _ := listed("?limit=100")
		return slices.Equal(got, []string{"depot", "far-red", "kiosk"}) && slices.Equal(held(), got)
	})
}
