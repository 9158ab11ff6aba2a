package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// done waits for the job a 202 (or 200) started and returns its result.
func done(a stacktest.API, r stacktest.Resp) map[string]any {
	a.T.Helper()
	if r.Status != 202 && r.Status != 200 {
		a.T.Fatalf("start: %d %s", r.Status, r.Body)
	}
	return a.WaitAction(r.JSON(a.T)["async_action_id"].(string))["result"].(map[string]any)
}

// Imports and bulk jobs check each item as a single write does: an item
// the schema refuses is a failed item with the schema's reason, the others
// are written.
func TestImportsAndBulkJobsReportRefusedItems(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	tier := map[string]any{"tier": map[string]any{"type": "string", "eq": []any{"gold", "silver"}}}
	a.MetadataSchema("customer", map[string]any{"tier": tier["tier"], "shoe": map[string]any{"type": "number"},
		"tags": map[string]any{"type": "string", "array": true}, "note": map[string]any{"type": "string"}})
	a.MetadataSchema("product", map[string]any{"tier": tier["tier"], "weight": map[string]any{"type": "number"}})
	a.MetadataSchema("voucher", tier)
	const why = "tier: must be equal to one of gold,silver (actual value is 'bronze')"
	counts := func(what string, res map[string]any, ok, failed float64) {
		t.Helper()
		if res["done_count"] != ok || res["failed_count"] != failed {
			t.Fatalf("%s: %v, want %v done and %v failed", what, res, ok, failed)
		}
	}

	// Customers: the CSV import (rows 2 and 4 refused; cells typed by the
	// schema: a number, a comma list, text kept as text), the metadata job.
	res := done(a, a.UploadCSV("/v1/customers/importCSV", "Source_id,Name,tier,shoe,tags,note\n"+
		"ann,Ann,gold,42,\"a, b\",true\nbob,Bob,bronze,41,,\ncat,Cat,silver,40,,\ndan,Dan,gold,big,,\n"))
	counts("customers import", res, 2, 2)
	if f := stacktest.FailedRows(res, "reason"); f[2] != why || f[4] != "shoe: must be a number" {
		t.Fatalf("customers import failures: %v", res["failed"])
	}
	if m := a.OK("GET", "/v1/customers/ann", nil)["metadata"].(map[string]any); m["shoe"] != 42.0 || m["note"] != "true" ||
		len(m["tags"].([]any)) != 2 || m["tags"].([]any)[1] != "b" {
		t.Fatalf("imported metadata: %v", m)
	}
	a.Fails("GET", "/v1/customers/bob", nil, 404, "not_found")
	res = done(a, a.Do("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": []string{"ann", "cat"},
		"metadata": map[string]any{"tier": "bronze"}}))
	counts("customers metadata", res, 0, 2)
	if m := a.OK("GET", "/v1/customers/ann", nil)["metadata"].(map[string]any); m["tier"] != "gold" {
		t.Fatalf("a refused metadata update wrote: %v", m)
	}

	// Products: the CSV import, the bulk and metadata jobs.
	// Its cells are typed by the product schema: weight a number.
	res = done(a, a.UploadCSV("/v1/products/importCSV", "name,source_id,tier,weight\nHat,hat,gold,0.5\nCap,cap,bronze,1\n"))
	counts("products import", res, 1, 1)
	if f := stacktest.FailedRows(res, "reason"); f[3] != why {
		t.Fatalf("products import failures: %v", res["failed"])
	}
	if m := a.OK("GET", "/v1/products/hat", nil)["metadata"].(map[string]any); m["weight"] != 0.5 {
		t.Fatalf("imported product metadata: %v", m)
	}
	res = done(a, a.Do("POST", "/v1/products/bulk/async", []map[string]any{
		{"source_id": "hat", "metadata": map[string]any{"tier": "bronze"}},
		{"source_id": "scarf", "name": "Scarf", "metadata": map[string]any{"tier": "silver"}},
	}))
	counts("products bulk", res, 1, 1)
	res = done(a, a.Do("POST", "/v1/products/metadata/async", map[string]any{"source_ids": []string{"hat", "scarf"},
		"metadata": map[string]any{"tier": "bronze"}}))
	counts("products metadata", res, 0, 2)
	if m := a.OK("GET", "/v1/products/hat", nil)["metadata"].(map[string]any); m["tier"] != "gold" {
		t.Fatalf("a refused product update wrote: %v", m)
	}

	// Vouchers: the import, the metadata job.
	res = done(a, a.Do("POST", "/v1/vouchers/import", []any{
		map[string]any{"code": "V-1", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 5},
			"metadata": map[string]any{"tier": "gold"}},
		map[string]any{"code": "V-2", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 5},
			"metadata": map[string]any{"tier": "bronze"}},
	}))
	counts("vouchers import", res, 1, 1)
	if f := stacktest.FailedRows(res, "code"); f[2] != "V-2" {
		t.Fatalf("vouchers import failures: %v", res["failed"])
	}
	res = done(a, a.Do("POST", "/v1/vouchers/metadata/async", map[string]any{"codes": []string{"V-1"},
		"metadata": map[string]any{"tier": "bronze"}}))
	counts("vouchers metadata", res, 0, 1)
	if e := res["errors"].([]any)[0].(map[string]any); e["key"] != "metadata_validation_failed" || e["details"] != why {
		t.Fatalf("vouchers metadata errors: %v", res["errors"])
	}
}
