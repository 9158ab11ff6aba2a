package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// product creates a product with n SKUs and returns its id and the SKUs' ids.
func product(a stacktest.API, sourceID string, n int) (string, []string) {
	a.T.Helper()
	p := a.OK("POST", "/v1/products", map[string]any{"source_id": sourceID, "name": "Shirt " + sourceID, "price": 1999,
		"attributes": []string{"color"}, "metadata": map[string]any{"season": "summer"}})
	id := p["id"].(string)
	var skus []string
	for i := range n {
		k := a.OK("POST", "/v1/products/"+id+"/skus", map[string]any{"source_id": fmt.Sprintf("%s-sku-%d", sourceID, i),
			"sku": fmt.Sprintf("Size %d", i), "price": 2000 + i, "currency": "EUR", "attributes": map[string]any{"color": "blue"}})
		skus = append(skus, k["id"].(string))
	}
	return id, skus
}

// rows counts a project's rows of a table matching a condition, straight
// from the cluster's database: what "removed for good" means.
func rows(a stacktest.API, table, cond string, args ...any) int {
	a.T.Helper()
	var n int
	err := a.E.Stack.Regional[a.P.Cluster].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM `+table+` WHERE project_id = $1 AND `+cond, append([]any{a.P.ID}, args...)...).Scan(&n)
	if err != nil {
		a.T.Fatal(err)
	}
	return n
}

func binEntries(a stacktest.API, query string) []map[string]any {
	a.T.Helper()
	var out []map[string]any
	for _, d := range a.OK("GET", "/v1/trash-bin"+query, nil)["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

func TestProductsAndSKUsInTheReferenceShapes(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("product.created", "product.updated", "sku.created", "sku.updated")
	id, skus := product(a, "shirt", 2)

	p := a.OK("GET", "/v1/products/shirt", nil)
	if p["id"] != id || p["object"] != "product" || p["price"] != 1999.0 || p["name"] != "Shirt shirt" ||
		p["created_at"] == nil || p["updated_at"] != nil || p["image_url"] != nil {
		t.Fatalf("product: %v", p)
	}
	list := p["skus"].(map[string]any)
	if list["object"] != "list" || list["total"] != 2.0 || len(list["data"].([]any)) != 2 {
		t.Fatalf("embedded skus: %v", list)
	}
	k := a.OK("GET", "/v1/skus/shirt-sku-1", nil)
	if k["id"] != skus[1] || k["product_id"] != id || k["sku"] != "Size 1" || k["currency"] != "EUR" || k["object"] != "sku" ||
		k["attributes"].(map[string]any)["color"] != "blue" {
		t.Fatalf("sku: %v", k)
	}

	// PUT changes what it names and clears nulls.
	p = a.OK("PUT", "/v1/products/"+id, map[string]any{"name": "Tee", "image_url": "https://img.example.com/t.png", "price": nil})
	if p["name"] != "Tee" || p["price"] != nil || p["image_url"] != "https://img.example.com/t.png" || p["updated_at"] == nil ||
		p["metadata"].(map[string]any)["season"] != "summer" {
		t.Fatalf("updated: %v", p)
	}
	k = a.OK("PUT", "/v1/products/shirt/skus/"+skus[0], map[string]any{"price": 1500, "metadata": map[string]any{"x": 1}})
	if k["price"] != 1500.0 || k["sku"] != "Size 0" || k["updated_at"] == nil {
		t.Fatalf("updated sku: %v", k)
	}
	// A SKU is reached through its own product only.
	other, _ := product(a, "other", 0)
	a.Fails("PUT", "/v1/products/"+other+"/skus/"+skus[0], map[string]any{"price": 1}, 404, "not_found")

	sl := a.OK("GET", "/v1/products/"+id+"/skus?limit=1", nil)
	if sl["data_ref"] != "skus" || sl["total"] != 2.0 || len(sl["skus"].([]any)) != 1 || sl["has_more"] != true {
		t.Fatalf("sku page: %v", sl)
	}
	sl = a.OK("GET", "/v1/products/"+id+"/skus?limit=1&starting_after_id="+sl["more_starting_after"].(string), nil)
	if sl["skus"].([]any)[0].(map[string]any)["id"] != skus[1] || sl["has_more"] != false {
		t.Fatalf("second sku page: %v", sl)
	}
	pl := a.OK("GET", "/v1/products?limit=1&order=-created_at", nil)
	if pl["data_ref"] != "products" || pl["total"] != 2.0 || pl["products"].([]any)[0].(map[string]any)["id"] != other {
		t.Fatalf("product list: %v", pl)
	}

	for _, c := range []struct {
		path string
		body any
		want string
	}{
		{"/v1/products", map[string]any{"name": "x", "price": 12.5}, "price"},
		{"/v1/products", map[string]any{"name": "x", "price": -1}, "price"},
		{"/v1/products", map[string]any{"name": "x", "attributes": "color"}, "attributes"},
		{"/v1/products", map[string]any{"name": "x", "image_url": "not a url"}, "image_url"},
		{"/v1/products", map[string]any{"id": "prod_mine", "name": "x"}, "id"},
		{"/v1/products", []any{1}, "object"},
		{"/v1/products/" + id + "/skus", map[string]any{"currency": "euro"}, "currency"},
		{"/v1/products/" + id + "/skus", map[string]any{"attributes": []string{"a"}}, "attributes"},
	} {
		e := a.Fails("POST", c.path, c.body, 400, "invalid_payload")
		if !strings.Contains(e["details"].(string), c.want) {
			t.Errorf("%v: details do not name %s: %v", c.body, c.want, e)
		}
	}
	a.Fails("POST", "/v1/products/"+id+"/skus", map[string]any{"source_id": "shirt-sku-0"}, 409, "duplicate_found")
	a.Fails("GET", "/v1/skus/nope", nil, 404, "not_found")

	hooks.Wait(t, "product.created", 2)
	hooks.Wait(t, "sku.created", 2)
	if got := hooks.Wait(t, "product.updated", 1); got["name"] != "Tee" {
		t.Fatalf("product.updated: %v", got)
	}
	hooks.Wait(t, "sku.updated", 1)
}

func TestDeletingToTheBinAndForGood(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("product.deleted", "sku.deleted")
	id, skus := product(a, "mug", 3)

	// Refused while live.
	a.Fails("POST", "/v1/products", map[string]any{"source_id": "mug", "name": "again"}, 409, "duplicate_found")

	r := a.Do("DELETE", "/v1/products/mug", nil)
	if r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("delete: %d %q", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/products/"+id, nil, 404, "not_found")
	a.Fails("GET", "/v1/products/mug", nil, 404, "not_found")
	for _, k := range skus {
		a.Fails("GET", "/v1/skus/"+k, nil, 404, "not_found")
	}
	if l := a.OK("GET", "/v1/products", nil); l["total"] != 0.0 {
		t.Fatalf("a binned product is listed: %v", l)
	}
	// One entry holds the product; its SKUs went with it.
	entries := binEntries(a, "")
	if len(entries) != 1 {
		t.Fatalf("bin: %v", entries)
	}
	pe := entries[0]
	if pe["resource_type"] != "product" || pe["object"] != "product" || pe["resource_id"] != id || pe["resource_name"] != "Shirt mug" ||
		!strings.HasPrefix(pe["id"].(string), "bin_") || pe["created_at"] == nil || pe["resource_parent_id"] != nil {
		t.Fatalf("entry: %v", pe)
	}
	if _, ok := pe["deleted_by_user_id"]; !ok {
		t.Fatalf("entry lacks deleted_by_user_id: %v", pe)
	}
	if n := rows(a, "binned_skus", "product_id = $2 AND bin_id = $3", id, pe["id"]); n != 3 || rows(a, "skus", "product_id = $2", id) != 0 {
		t.Fatalf("%d of 3 SKUs went to the bin with their product", n)
	}
	if got := hooks.Wait(t, "product.deleted", 1); got["id"] != id {
		t.Fatalf("product.deleted: %v", got)
	}
	hooks.Wait(t, "sku.deleted", 3)

	// The source_id is free at once, SKU source_ids too.
	id2, skus2 := product(a, "mug", 3)
	if id2 == id {
		t.Fatal("same id")
	}

	// force=true removes the product and its SKUs for good.
	r = a.Do("DELETE", "/v1/products/"+id2+"?force=true", nil)
	if r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("force delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/skus/"+skus2[0], nil, 404, "not_found")
	if n := rows(a, "products", "id = $2", id2); n != 0 {
		t.Fatalf("product rows after force: %d", n)
	}
	if n := rows(a, "skus", "product_id = $2", id2); n != 0 {
		t.Fatalf("sku rows after force: %d", n)
	}
	if len(binEntries(a, "")) != 1 {
		t.Fatal("force delete touched the bin")
	}
	hooks.Wait(t, "sku.deleted", 6)

	// force=false is the bin, as absent is; any other value is a 400.
	id3, _ := product(a, "cup", 1)
	e := a.Fails("DELETE", "/v1/products/"+id3+"?force=yes", nil, 400, "invalid_query_params")
	if !strings.Contains(e["details"].(string), "force") {
		t.Fatalf("details do not name force: %v", e)
	}
	if r := a.Do("DELETE", "/v1/products/"+id3+"?force=false", nil); r.Status != 204 {
		t.Fatalf("force=false: %d %s", r.Status, r.Body)
	}
	if n := len(binEntries(a, "?limit=100")); n != 2 {
		t.Fatalf("bin after force=false: %d entries", n)
	}

	// A single SKU goes to the bin and back out of the catalogue alone.
	id4, skus4 := product(a, "pot", 2)
	if r := a.Do("DELETE", "/v1/products/"+id4+"/skus/"+skus4[0], nil); r.Status != 204 {
		t.Fatalf("sku delete: %d %s", r.Status, r.Body)
	}
	if p := a.OK("GET", "/v1/products/"+id4, nil); p["skus"].(map[string]any)["total"] != 1.0 {
		t.Fatalf("product after sku delete: %v", p)
	}
	if r := a.Do("DELETE", "/v1/products/"+id4+"/skus/"+skus4[1]+"?force=true", nil); r.Status != 204 {
		t.Fatalf("sku force delete: %d %s", r.Status, r.Body)
	}
	if n := rows(a, "skus", "id = $2", skus4[1]); n != 0 {
		t.Fatalf("force-deleted sku rows: %d", n)
	}
	se := binEntries(a, "?order=-id&limit=1")[0]
	if se["resource_type"] != "sku" || se["object"] != "sku" || se["resource_id"] != skus4[0] || se["resource_parent_id"] != id4 ||
		se["resource_name"] != "Size 0" {
		t.Fatalf("sku entry: %v", se)
	}
}

func TestUnknownProductIsTheInterfaces404(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for _, path := range []string{"/v1/products/prod_nope", "/v1/products/prod_nope?force=true"} {
		r := a.Do("DELETE", path, nil)
		m := r.JSON(t)
		rid, _ := m["request_id"].(string)
		if r.Status != 404 || m["code"] != 404.0 || m["key"] != "not_found" || m["message"] != "Resource not found" ||
			!strings.Contains(m["details"].(string), "prod_nope") || !strings.Contains(m["details"].(string), "product") ||
			!strings.HasPrefix(rid, "v-") || rid != r.Header.Get("X-Request-Id") ||
			m["resource_id"] != "prod_nope" || m["resource_type"] != "product" || len(m) != 7 {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
}

func TestBinListsPagesAndRemovesForGood(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	var ids []string
	var skus [][]string
	for i := range 5 {
		id, ks := product(a, fmt.Sprintf("p%d", i), 2)
		ids, skus = append(ids, id), append(skus, ks)
	}
	// Four products to the bin, and both SKUs of the fifth on their own.
	for _, id := range ids[:4] {
		if r := a.Do("DELETE", "/v1/products/"+id, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
	}
	for _, k := range skus[4] {
		if r := a.Do("DELETE", "/v1/products/"+ids[4]+"/skus/"+k, nil); r.Status != 204 {
			t.Fatalf("delete sku: %d %s", r.Status, r.Body)
		}
	}
	// 6 entries, paged 4 at a time by the cursor, in id order.
	var seen []string
	after := ""
	for {
		q := "?limit=4"
		if after != "" {
			q += "&starting_after_id=" + after
		}
		l := a.OK("GET", "/v1/trash-bin"+q, nil)
		if l["total"] != 6.0 || l["data_ref"] != "data" || l["object"] != "list" {
			t.Fatalf("page: %v", l)
		}
		for _, d := range l["data"].([]any) {
			seen = append(seen, d.(map[string]any)["id"].(string))
		}
		if l["has_more"] != true {
			break
		}
		after = l["more_starting_after"].(string)
	}
	if len(seen) != 6 || !sort.StringsAreSorted(seen) {
		t.Fatalf("pages: %v", seen)
	}
	if desc := binEntries(a, "?order=-id&limit=100"); desc[0]["id"] != seen[5] {
		t.Fatalf("order=-id: %v", desc)
	}
	products := binEntries(a, "?filters[resource_type][conditions][$in][0]=product&limit=100")
	if len(products) != 4 {
		t.Fatalf("filter by type: %v", products)
	}
	a.Fails("GET", "/v1/trash-bin?order=name", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/trash-bin?filters[color][conditions][$is]=x", nil, 400, "invalid_query_params")

	// Removing a product's entry removes it and its SKUs for good.
	entryOf := func(resourceID string) string {
		for _, e := range binEntries(a, "?limit=100") {
			if e["resource_id"] == resourceID {
				return e["id"].(string)
			}
		}
		t.Fatalf("no entry for %s", resourceID)
		return ""
	}
	entry := entryOf(ids[0])
	if r := a.Do("DELETE", "/v1/trash-bin/"+entry, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("remove: %d %s", r.Status, r.Body)
	}
	if n := rows(a, "products", "id = $2", ids[0]); n != 0 {
		t.Fatal("the product is still stored")
	}
	if n := rows(a, "skus", "product_id = $2", ids[0]); n != 0 {
		t.Fatal("its SKUs are still stored")
	}
	if n := len(binEntries(a, "?limit=100")); n != 5 {
		t.Fatalf("bin after removal: %d entries", n)
	}
	e := a.Fails("DELETE", "/v1/trash-bin/"+entry, nil, 404, "not_found")
	if e["resource_type"] != "bin_entry" || e["resource_id"] != entry {
		t.Fatalf("404: %v", e)
	}

	// A SKU's entry removes that SKU only.
	if r := a.Do("DELETE", "/v1/trash-bin/"+entryOf(skus[4][0]), nil); r.Status != 204 {
		t.Fatalf("remove sku: %d %s", r.Status, r.Body)
	}
	if rows(a, "binned_skus", "id = $2", skus[4][0]) != 0 || rows(a, "products", "id = $2 AND bin_id IS NULL", ids[4]) != 1 {
		t.Fatal("removing a SKU's entry did not remove just the SKU")
	}
	// A product binned after one of its SKUs takes that SKU's entry with it
	// when it is removed.
	if r := a.Do("DELETE", "/v1/products/"+ids[4], nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := a.Do("DELETE", "/v1/trash-bin/"+entryOf(ids[4]), nil); r.Status != 204 {
		t.Fatalf("remove: %d %s", r.Status, r.Body)
	}
	if n := rows(a, "binned_skus", "product_id = $2", ids[4]) + rows(a, "skus", "product_id = $2", ids[4]); n != 0 {
		t.Fatal("the SKU binned on its own is still stored")
	}
	if n := len(binEntries(a, "?limit=100")); n != 3 {
		t.Fatalf("bin: %d entries, want the 3 products left", n)
	}
}

func TestRetentionSweepEmptiesTheBin(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	id, _ := product(a, "old", 2)
	if r := a.Do("DELETE", "/v1/products/"+id, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.E.Clock.Advance(29 * 24 * time.Hour)
	time.Sleep(300 * time.Millisecond) // several sweeps (50 ms apart in tests)
	if n := len(binEntries(a, "")); n != 1 {
		t.Fatalf("swept before 30 days: %d entries left", n)
	}
	fresh, _ := product(a, "fresh", 1)
	if r := a.Do("DELETE", "/v1/products/"+fresh, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.E.Clock.Advance(2 * 24 * time.Hour)
	stacktest.Eventually(t, 5*time.Second, "the old entry swept", func() bool { return len(binEntries(a, "")) == 1 })
	if n := rows(a, "products", "id = $2", id); n != 0 {
		t.Fatal("the expired product is still stored")
	}
	if n := rows(a, "skus", "product_id = $2", id); n != 0 {
		t.Fatal("its SKUs are still stored")
	}
	if e := binEntries(a, "")[0]; e["resource_id"] != fresh {
		t.Fatalf("the fresh entry went, or the old one stayed: %v", e)
	}
}

func TestAnotherProjectsProductsAreNotFound(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	b := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	id, skus := product(a, "mine", 1)
	b.Fails("GET", "/v1/products/"+id, nil, 404, "not_found")
	b.Fails("GET", "/v1/products/mine", nil, 404, "not_found")
	b.Fails("GET", "/v1/skus/"+skus[0], nil, 404, "not_found")
	b.Fails("PUT", "/v1/products/"+id, map[string]any{"name": "theirs"}, 404, "not_found")
	b.Fails("POST", "/v1/products/"+id+"/skus", map[string]any{"sku": "x"}, 404, "not_found")
	e := b.Fails("DELETE", "/v1/products/"+id, nil, 404, "not_found")
	if e["resource_type"] != "product" || e["resource_id"] != id {
		t.Fatalf("404: %v", e)
	}
	b.Fails("DELETE", "/v1/products/"+id+"?force=true", nil, 404, "not_found")
	// The same source_id is free in another project.
	product(b, "mine", 0)

	a.Do("DELETE", "/v1/products/"+id, nil)
	entry := binEntries(a, "")[0]["id"].(string)
	if l := b.OK("GET", "/v1/trash-bin", nil); l["total"] != 0.0 {
		t.Fatalf("b sees a's bin: %v", l)
	}
	b.Fails("DELETE", "/v1/trash-bin/"+entry, nil, 404, "not_found")
	if len(binEntries(a, "")) != 1 {
		t.Fatal("b removed a's entry")
	}
	if p := a.OK("GET", "/v1/products", nil); p["total"] != 0.0 {
		t.Fatalf("a: %v", p)
	}
}

// A product with many SKUs goes to the bin in one step: SKUs added while
// it is deleted either go with it or are refused, never left live.
func TestDeletingAProductWithManySKUsIsOneStep(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	id, _ := product(a, "big", 0)
	pool := a.E.Stack.Regional["api"].Pool()
	if _, err := pool.Exec(context.Background(), `INSERT INTO skus (project_id, id, product_id, source_id, created_at)
		SELECT $1, 'sku_bulk' || lpad(i::TEXT, 5, '0'), $2, 'big-' || i::TEXT, now() FROM generate_series(1, 2000) AS i`,
		a.P.ID, id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var created atomic.Int32
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := a.Do("POST", "/v1/products/"+id+"/skus", map[string]any{"source_id": fmt.Sprintf("late-%d-%d", w, i)})
				if r.Status != 200 && r.Status != 404 {
					t.Errorf("sku during delete: %d %s", r.Status, r.Body)
					return
				}
				if r.Status == 200 {
					created.Add(1)
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	r := a.Do("DELETE", "/v1/products/"+id, nil)
	close(stop)
	wg.Wait()
	if r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if n := rows(a, "skus", "product_id = $2", id); n != 0 {
		t.Fatalf("%d SKUs of the binned product are live", n)
	}
	entry := binEntries(a, "")[0]["id"]
	binned := rows(a, "binned_skus", "product_id = $2 AND bin_id = $3", id, entry)
	if all := 2000 + int(created.Load()); binned != all {
		t.Fatalf("%d of %d SKUs went with their product", binned, all)
	}
}
