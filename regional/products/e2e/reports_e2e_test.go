package e2e_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A products bulk update's result links its report, as the reference's
// PRODUCTS.BULK_UPDATE result does: each item's row, source_id and outcome
// (a refused item with why), served as an export's file; the metadata
// update's result has none.
func TestProductBulkUpdateReportListsEachItemsOutcome(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.MetadataSchema("product", map[string]any{"size": map[string]any{"type": "number"}})
	r := a.Do("POST", "/v1/products/bulk/async", []map[string]any{
		{"source_id": "p-1", "name": "One"},
		{"source_id": "p-2", "metadata": map[string]any{"size": "huge"}},
	})
	res := a.WaitAction(r.JSON(t)["async_action_id"].(string))["result"].(map[string]any)
	reports, _ := res["reports"].([]any)
	if res["done_count"] != 1.0 || res["failed_count"] != 1.0 || len(reports) != 1 || res["reports_available_till"] == nil {
		t.Fatalf("result: %v", res)
	}
	f := a.E.Do(t, "GET", reports[0].(string), nil, nil)
	lines := strings.Split(strings.TrimSpace(string(f.Body)), "\n")
	if f.Status != 200 || len(lines) != 3 || lines[0] != "row,source_id,status,reason" || lines[1] != "1,p-1,SUCCESS," ||
		!strings.HasPrefix(lines[2], "2,p-2,FAILED,") || !strings.Contains(lines[2], "size") {
		t.Fatalf("the report: %d %q", f.Status, lines)
	}
	r = a.Do("POST", "/v1/products/metadata/async", map[string]any{"source_ids": []string{"p-1"}, "metadata": map[string]any{"size": 3}})
	if md := a.WaitAction(r.JSON(t)["async_action_id"].(string))["result"].(map[string]any); md["reports"] != nil {
		t.Errorf("a metadata update's result: %v", md)
	}
}
