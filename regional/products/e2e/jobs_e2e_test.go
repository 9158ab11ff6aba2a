package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func TestCSVImportsKeepGoodRowsAndReportBadOnes(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("product.created", "product.updated")
	existing, _ := product(a, "old-1", 0)

	csv := "\xef\xbb\xbfname,source_id,price,attributes,image_url,color\n" + // line 1, with a BOM
		"Hat,hat-1,1299,\"size,color\",https://img.example.com/hat.png,red\n" + // 2: good
		",nameless,100,,,\n" + // 3: no name
		"Scarf,scarf-1,12.99,,,\n" + // 4: a decimal price
		"Sock,hat-1,100,,,\n" + // 5: hat-1 again
		"Belt,belt-1,100\n" + // 6: too few fields
		"Renamed,old-1,,,,\n" + // 7: renames the existing product
		"Glove,,50,,ftp://x,\n" + // 8: not an http URL
		"Coat,,5000,,,\n" // 9: good, without source_id
	r := a.UploadCSV("/v1/products/importCSV", csv)
	if r.Status != 200 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	act := a.WaitAction(r.JSON(t)["async_action_id"].(string))
	if act["type"] != "PRODUCTS.IMPORT_CSV" || act["progress"] != 100.0 {
		t.Fatalf("action: %v", act)
	}
	res := act["result"].(map[string]any)
	if res["done_count"] != 3.0 || res["failed_count"] != 5.0 {
		t.Fatalf("result: %v", res)
	}
	failed := stacktest.FailedRows(res, "reason")
	for line, want := range map[int]string{3: "name is required", 4: "smallest currency unit", 5: "already on line 2",
		6: "3 fields, the header 6", 8: "image_url"} {
		if !strings.Contains(failed[line], want) {
			t.Errorf("line %d: reason %q does not say %q", line, failed[line], want)
		}
	}
	hat := a.OK("GET", "/v1/products/hat-1", nil)
	if hat["name"] != "Hat" || hat["price"] != 1299.0 || hat["image_url"] != "https://img.example.com/hat.png" ||
		hat["metadata"].(map[string]any)["color"] != "red" || len(hat["attributes"].([]any)) != 2 {
		t.Fatalf("imported: %v", hat)
	}
	if p := a.OK("GET", "/v1/products/"+existing, nil); p["name"] != "Renamed" || p["price"] != 1999.0 {
		t.Fatalf("renamed: %v", p)
	}
	if l := a.OK("GET", "/v1/products", nil); l["total"] != 3.0 {
		t.Fatalf("products: %v", l)
	}
	hooks.Wait(t, "product.created", 3) // old-1 by the API, hat-1 and the coat by the import
	hooks.Wait(t, "product.updated", 1)

	// SKUs go to products named by id or source_id.
	skus := "product_id,sku,source_id,price,currency,attributes,material\n" +
		"hat-1,Hat S,hat-s,1299,EUR,\"{'size':'S'}\",wool\n" + // 2: good, by source_id
		existing + ",Old M,old-m,,,,\n" + // 3: good, by id
		"nope,X,x-1,,,,\n" + // 4: unknown product
		"hat-1,Hat L,,1,,,\n" + // 5: no source_id
		"hat-1,Hat M,hat-m,1,,{bad,\n" + // 6: attributes not JSON
		"hat-1,Hat XL,hat-xl,1,euro,,\n" // 7: bad currency
	r = a.UploadCSV("/v1/skus/importCSV", skus)
	if r.Status != 200 {
		t.Fatalf("import skus: %d %s", r.Status, r.Body)
	}
	res = a.WaitAction(r.JSON(t)["async_action_id"].(string))["result"].(map[string]any)
	if res["done_count"] != 2.0 || res["failed_count"] != 4.0 {
		t.Fatalf("sku result: %v", res)
	}
	failed = stacktest.FailedRows(res, "reason")
	for line, want := range map[int]string{4: `product "nope" is not found`, 5: "source_id is required", 6: "attributes", 7: "currency"} {
		if !strings.Contains(failed[line], want) {
			t.Errorf("sku line %d: reason %q does not say %q", line, failed[line], want)
		}
	}
	k := a.OK("GET", "/v1/skus/hat-s", nil)
	if k["product_id"] != hat["id"] || k["attributes"].(map[string]any)["size"] != "S" || k["metadata"].(map[string]any)["material"] != "wool" {
		t.Fatalf("imported sku: %v", k)
	}

	// A second import of a SKU updates its sku and price; another product cannot take it.
	r = a.UploadCSV("/v1/skus/importCSV", "product_id,sku,source_id,price\nhat-1,Hat Small,hat-s,1399\n"+existing+",Stolen,hat-s,1\n")
	res = a.WaitAction(r.JSON(t)["async_action_id"].(string))["result"].(map[string]any)
	if res["done_count"] != 1.0 || !strings.Contains(stacktest.FailedRows(res, "reason")[3], "already on line 2") {
		t.Fatalf("second sku import: %v", res)
	}
	if k := a.OK("GET", "/v1/skus/hat-s", nil); k["sku"] != "Hat Small" || k["price"] != 1399.0 {
		t.Fatalf("updated sku: %v", k)
	}
	r = a.UploadCSV("/v1/skus/importCSV", "product_id,source_id\n"+existing+",hat-s\n")
	res = a.WaitAction(r.JSON(t)["async_action_id"].(string))["result"].(map[string]any)
	if !strings.Contains(stacktest.FailedRows(res, "reason")[2], "is a SKU of product") {
		t.Fatalf("sku moved between products: %v", res)
	}

	// What is wrong with the file as a whole is the request's 400.
	for _, c := range []struct{ path, csv, want string }{
		{"/v1/products/importCSV", "source_id,price\nx,1\n", "name"},
		{"/v1/skus/importCSV", "sku,price\nx,1\n", "product_id"},
		{"/v1/products/importCSV", "name,my key\nx,1\n", "white space"},
		{"/v1/products/importCSV", "name,name\nx,y\n", "twice"},
		{"/v1/products/importCSV", "", "header"},
	} {
		r := a.UploadCSV(c.path, c.csv)
		if m := r.JSON(t); r.Status != 400 || !strings.Contains(m["details"].(string), c.want) {
			t.Errorf("%q: %d %s", c.csv, r.Status, r.Body)
		}
	}
	r = a.E.Do(t, "POST", stacktest.URL("api", "/v1/products/importCSV"), a.P.Header(), map[string]any{"file": "x"})
	if r.Status != 400 || !strings.Contains(string(r.Body), "multipart") {
		t.Fatalf("json body: %d %s", r.Status, r.Body)
	}
}

func TestBulkAndMetadataUpdatesUpsertBySourceID(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	product(a, "a", 0)
	r := a.Do("POST", "/v1/products/bulk/async", []map[string]any{
		{"source_id": "a", "name": "A2", "price": 10},
		{"source_id": "b", "name": "B", "metadata": map[string]any{"k": "v"}},
	})
	if r.Status != http.StatusAccepted {
		t.Fatalf("bulk: %d %s", r.Status, r.Body)
	}
	act := a.WaitAction(r.JSON(t)["async_action_id"].(string))
	if act["type"] != "PRODUCTS.BULK_UPDATE" || act["result"].(map[string]any)["done_count"] != 2.0 {
		t.Fatalf("bulk action: %v", act)
	}
	if p := a.OK("GET", "/v1/products/a", nil); p["name"] != "A2" || p["price"] != 10.0 || p["metadata"].(map[string]any)["season"] != "summer" {
		t.Fatalf("a: %v", p)
	}
	if p := a.OK("GET", "/v1/products/b", nil); p["name"] != "B" {
		t.Fatalf("b: %v", p)
	}

	r = a.Do("POST", "/v1/products/metadata/async", map[string]any{"source_ids": []string{"a", "b", "c"},
		"metadata": map[string]any{"brand": "Acme"}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("metadata: %d %s", r.Status, r.Body)
	}
	act = a.WaitAction(r.JSON(t)["async_action_id"].(string))
	if act["type"] != "PRODUCTS.METADATA_UPDATE" || act["result"].(map[string]any)["done_count"] != 3.0 {
		t.Fatalf("metadata action: %v", act)
	}
	a1 := a.OK("GET", "/v1/products/a", nil)["metadata"].(map[string]any)
	if a1["brand"] != "Acme" || a1["season"] != "summer" {
		t.Fatalf("a's metadata: %v", a1)
	}
	if m := a.OK("GET", "/v1/products/c", nil)["metadata"].(map[string]any); m["brand"] != "Acme" {
		t.Fatalf("c: %v", m)
	}

	for _, c := range []struct {
		path string
		body any
		want string
	}{
		{"/v1/products/bulk/async", map[string]any{"source_id": "a"}, "array"},
		{"/v1/products/bulk/async", []any{}, "at least one"},
		{"/v1/products/bulk/async", []any{map[string]any{"name": "x"}}, "Item 0"},
		{"/v1/products/bulk/async", []any{map[string]any{"source_id": "x"}, map[string]any{"source_id": "y", "price": "1"}}, "Item 1"},
		{"/v1/products/metadata/async", map[string]any{"source_ids": []string{}, "metadata": map[string]any{}}, "source_ids"},
		{"/v1/products/metadata/async", map[string]any{"source_ids": []string{"a"}}, "metadata"},
	} {
		e := a.Fails("POST", c.path, c.body, 400, "invalid_payload")
		if !strings.Contains(e["details"].(string), c.want) {
			t.Errorf("%v: %v does not say %s", c.body, e, c.want)
		}
	}
}
