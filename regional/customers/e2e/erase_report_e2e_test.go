package e2e_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A bulk update whose report is being written when one of its customers
// is permanently deleted ends with its report all the same: the job's
// result links it, and its file holds every item's row, the erased
// customer's with her values blanked. The job is held between its two
// chunks (its second waits for a customer's row the test locks) while
// the deletion answers and its erasure runs.
func TestAReportBeingWrittenWhenItsCustomerIsErasedIsKeptRedacted(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	dora := a.OK("POST", "/v1/customers", map[string]any{"source_id": "dora-report", "name": "Dora Reported",
		"email": "dora.reported@example.com"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "blk-3000"})
	const n = 4000 // two chunks of the job (importChunk 2000)
	items := make([]any, n)
	items[0] = map[string]any{"source_id": "dora-report", "name": "Dora Reported"}
	for i := 1; i < n; i++ {
		items[i] = map[string]any{"source_id": fmt.Sprintf("b-%d", i+1)}
	}
	items[2999] = map[string]any{"source_id": "blk-3000"}

	lock, err := a.E.Stack.Regional["api"].Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM customers WHERE project_id = $1 AND source_id = 'blk-3000' FOR UPDATE`, a.P.ID); err != nil {
		t.Fatal(err)
	}
	r := a.Do("POST", "/v1/customers/bulk/async", items)
	if r.Status != 202 {
		t.Fatalf("bulk: %d %s", r.Status, r.Body)
	}
	actID := r.JSON(t)["async_action_id"].(string)
	// The first chunk, with her row in the report, is committed; the
	// second waits for the locked row.
	stacktest.Eventually(t, 20*time.Second, "the first chunk", func() bool {
		return a.OK("GET", "/v1/async-actions/"+actID, nil)["progress"] == 50.0
	})
	a.DeletePermanently(dora)
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res := a.WaitAction(actID)["result"].(map[string]any)
	reports, _ := res["reports"].([]any)
	if len(reports) != 1 || res["reports_available_till"] == nil || res["done_count"] != float64(n) {
		t.Fatalf("the job's result: reports %v, till %v, done %v", res["reports"], res["reports_available_till"], res["done_count"])
	}
	var f stacktest.Resp
	stacktest.Eventually(t, 20*time.Second, "the report, once the erasure is done", func() bool {
		f = a.E.Do(t, "GET", reports[0].(string), nil, nil)
		return f.Status == 200
	})
	for _, v := range []string{"dora-report", "Dora Reported", "dora.reported@example.com"} {
		if strings.Contains(string(f.Body), v) {
			t.Errorf("the report holds %q", v)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(string(f.Body))).ReadAll()
	if err != nil {
		t.Fatalf("the report is no CSV: %v", err)
	}
	if len(rows) != n+1 {
		t.Fatalf("the report has %d rows, want the header and %d", len(rows), n)
	}
	for i, want := range map[int]string{0: "row|source_id|status|reason", 1: "1||SUCCESS|", 2: "2|b-2|SUCCESS|",
		2000: "2000|b-2000|SUCCESS|", 2001: "2001|b-2001|SUCCESS|", 3000: "3000|blk-3000|SUCCESS|", n: fmt.Sprintf("%d|b-%d|SUCCESS|", n, n)} {
		if got := strings.Join(rows[i], "|"); got != want {
			t.Errorf("report row %d: %s, want %s", i, got, want)
		}
	}
	if hl := f.Header.Get("Content-Length"); hl != "" && hl != fmt.Sprint(len(f.Body)) {
		t.Errorf("Content-Length %s for a body of %d bytes", hl, len(f.Body))
	}
}
