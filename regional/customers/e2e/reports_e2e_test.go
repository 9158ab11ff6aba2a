package e2e_test

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A bulk update's result links its report: a CSV of every item's outcome
// (row, source_id, SUCCESS or FAILED and why), downloaded from the
// cluster's download host as an export's file is, until
// reports_available_till; the report is no export of the /v1/exports
// routes, and once its retention has passed it is gone.
func TestBulkUpdateReportListsEachRowsOutcome(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.CustomerTiers("gold", "silver")
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "r-1", "name": "Ann"})
	act := finished(a, a.Do("POST", "/v1/customers/bulk/async", []any{
		map[string]any{"source_id": "r-1", "name": "Anne", "metadata": map[string]any{"tier": "gold"}},
		map[string]any{"source_id": "r-2", "metadata": map[string]any{"tier": "bronze"}},
		map[string]any{"source_id": "r-3, \"quoted\"", "email": "r3@example.com"},
	}))
	res := act["result"].(map[string]any)
	reports, _ := res["reports"].([]any)
	if res["done_count"] != 2.0 || res["failed_count"] != 1.0 || len(reports) != 1 || res["reports_available_till"] == nil {
		t.Fatalf("result: %v", res)
	}
	till, err := time.Parse(time.RFC3339, res["reports_available_till"].(string))
	if err != nil || till.Before(a.E.Clock.Now().Add(24*time.Hour)) {
		t.Fatalf("reports_available_till: %v %v", res["reports_available_till"], err)
	}
	url := reports[0].(string)
	if !strings.Contains(url, "download.localhost") {
		t.Errorf("the report's link is not on the download host: %s", url)
	}
	f := a.E.Do(t, "GET", url, nil, nil)
	if f.Status != 200 || !strings.HasPrefix(f.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("the report: %d %v %s", f.Status, f.Header, f.Body)
	}
	rows, err := csv.NewReader(strings.NewReader(string(f.Body))).ReadAll()
	if err != nil {
		t.Fatalf("the report is no CSV: %v\n%s", err, f.Body)
	}
	want := [][]string{{"row", "source_id", "status", "reason"}, {"1", "r-1", "SUCCESS", ""},
		{"2", "r-2", "FAILED", "tier: must be equal to one of gold,silver (actual value is 'bronze')"},
		{"3", "r-3, \"quoted\"", "SUCCESS", ""}}
	if len(rows) != len(want) {
		t.Fatalf("the report's rows: %q", rows)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("report row %d: %q, want %q", i, rows[i], want[i])
		}
	}
	// The report is the job's, not one of the project's exports.
	id := url[strings.Index(url, "/v1/exports/")+len("/v1/exports/") : strings.Index(url, "?")]
	a.Fails("GET", "/v1/exports/"+id, nil, 404, "not_found")
	a.Fails("DELETE", "/v1/exports/"+id, nil, 404, "not_found")
	if l := a.OK("GET", "/v1/exports", nil); l["total"] != 0.0 {
		t.Errorf("the exports list holds the report: %v", l)
	}
	// A metadata update's result has no reports in the reference.
	md := finished(a, a.Do("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": []string{"r-1"},
		"metadata": map[string]any{"tier": "silver"}}))["result"].(map[string]any)
	if _, ok := md["reports"]; ok {
		t.Errorf("a metadata update's result: %v", md)
	}

	// Past its retention the report is gone, its link with it.
	a.E.Clock.Advance(till.Sub(a.E.Clock.Now()) + time.Minute)
	stacktest.Eventually(t, 10*time.Second, "the report swept", func() bool {
		var n int
		if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM export_chunks WHERE project_id = $1 AND export_id = $2`, a.P.ID, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if f := a.E.Do(t, "GET", url, nil, nil); f.Status == 200 {
		t.Errorf("the swept report's link: %d %s", f.Status, f.Body)
	}
}
