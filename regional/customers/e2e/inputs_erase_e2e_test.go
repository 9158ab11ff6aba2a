package e2e_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
)

// heldJob queues a customer job with input as its route does (the CSV
// import streams it, StartJobFrom), held until release lets it run.
func heldJob(t *testing.T, a stacktest.API, jobType string, input []byte) string {
	t.Helper()
	if jobType != customers.JobImportCSV {
		return a.HoldJob(jobType, nil, input)
	}
	return a.HoldJobMadeBy(func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		act, _, err := async.StartJobFrom(ctx, tx, a.P.ID, jobType, nil, bytes.NewReader(input), customers.MaxInput)
		return act, err
	})
}

// release lets a held job run now.
func release(t *testing.T, a stacktest.API, actionID string) {
	t.Helper()
	a.ReleaseJob(actionID)
}

// storedInput is a job's input as stored (its parts in order).
func storedInput(t *testing.T, a stacktest.API, actionID string) string {
	t.Helper()
	rows, err := a.E.Stack.Regional["api"].Pool().Query(context.Background(), `SELECT data FROM async_inputs
		WHERE project_id = $1 AND action_id = $2 ORDER BY part`, a.P.ID, actionID)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(parts) == 0 {
		t.Fatalf("the job's input: %d parts, %v", len(parts), err)
	}
	return string(bytes.Join(parts, nil))
}

// erasuresPending counts the project's erasure tasks not yet done.
func erasuresPending(t *testing.T, a stacktest.API) int {
	t.Helper()
	var n int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox
		WHERE project_id = $1 AND kind = $2 AND status <> 'done'`, a.P.ID, async.ErasureKind).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// customersNaming counts the project's customers with one of values as
// their source_id, name or email.
func customersNaming(t *testing.T, a stacktest.API, values []string) int {
	t.Helper()
	var n int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT count(*) FROM customers
		WHERE project_id = $1 AND (source_id = ANY($2) OR name = ANY($2) OR email = ANY($2))`, a.P.ID, values).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func holdsAny(s string, values []string) []string {
	var held []string
	for _, v := range values {
		if strings.Contains(s, v) {
			held = append(held, v)
		}
	}
	return held
}

// A bulk update queued before a customer's permanent deletion and run
// after it: the erasure redacted her item in the stored input, and the
// job reports the item failed (no source_id, the reason saying why)
// rather than make a new customer of what it named; the other item is
// applied, and the job's report holds nothing of her.
func TestABulkUpdateQueuedBeforeAPermanentDeletionDoesNotBringTheCustomerBack(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	values := []string{"xena-bulk", "Xena Bulkley", "xena.bulk@example.com"}
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-bulk", "name": "Xena Bulkley",
		"email": "xena.bulk@example.com"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "yan-bulk"})
	act := heldJob(t, a, customers.JobBulkUpdate, []byte(`[{"source_id":"xena-bulk","name":"Xena Bulkley",`+
		`"email":"xena.bulk@example.com","metadata":{"tier":"gold"}},{"source_id":"yan-bulk","name":"Yan Other"}]`))
	if held := holdsAny(storedInput(t, a, act), values); len(held) != len(values) {
		t.Fatalf("the held job's input should name her: %v", held)
	}

	a.EraseNow(xena)
	if held := holdsAny(storedInput(t, a, act), values); len(held) > 0 {
		t.Errorf("the job's stored input still holds %v after the erasure: %s", held, storedInput(t, a, act))
	}

	release(t, a, act)
	res := a.WaitAction(act)["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if res["done_count"] != 1.0 || res["failed_count"] != 1.0 || len(errs) != 1 {
		t.Fatalf("the job's result: %v", res)
	}
	if e := errs[0].(map[string]any); e["details"] != async.ErasedItem || e["source_id"] != nil {
		t.Errorf("her item's failure: %v", e)
	}
	if n := customersNaming(t, a, values); n != 0 {
		t.Errorf("%d customers named by her values after the job", n)
	}
	a.Fails("GET", "/v1/customers/xena-bulk", nil, 404, "not_found")
	if c := a.OK("GET", "/v1/customers/yan-bulk", nil); c["name"] != "Yan Other" {
		t.Errorf("the other item: %v", c)
	}
	reports, _ := res["reports"].([]any)
	if len(reports) != 1 {
		t.Fatalf("the job's reports: %v", res["reports"])
	}
	f := a.E.Do(t, "GET", reports[0].(string), nil, nil)
	if f.Status != 200 || len(holdsAny(string(f.Body), values)) > 0 ||
		!strings.Contains(string(f.Body), "1,,FAILED,"+async.ErasedItem) || !strings.Contains(string(f.Body), "2,yan-bulk,SUCCESS") {
		t.Errorf("the report: %d %s", f.Status, f.Body)
	}
}

// The same for a CSV import: her row's fields are blanked in the stored
// file, which keeps its length and lines (a later row's failure names
// the line it had), and the row is reported failed by its row and line.
func TestACustomerImportQueuedBeforeAPermanentDeletionDoesNotBringTheCustomerBack(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	values := []string{"xena-csv", "Xena Csvley", "xena.csv@example.com"}
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-csv", "name": "Xena Csvley",
		"email": "xena.csv@example.com"})["id"].(string)
	file := "source_id,name,email,city,metadata.tier\n" +
		"xena-csv,Xena Csvley,xena.csv@example.com,Oslo,gold\n" + // row 1, line 2
		"yan-csv,\"Yan\nTwo\",yan.csv@example.com,Bergen,tin\n" + // row 2, lines 3-4
		"zed-csv,Zed\n" + // row 3, line 5: too few fields
		"amy-csv,Amy,,,\n"
	act := heldJob(t, a, customers.JobImportCSV, []byte(file))

	a.EraseNow(xena)
	stored := storedInput(t, a, act)
	if held := holdsAny(stored, values); len(held) > 0 {
		t.Errorf("the stored file still holds %v after the erasure: %q", held, stored)
	}
	if len(stored) != len(file) || strings.Count(stored, "\n") != strings.Count(file, "\n") ||
		!strings.HasSuffix(stored, file[strings.Index(file, "yan-csv"):]) || !strings.Contains(stored, ",Oslo,gold\n") {
		t.Errorf("the stored file should keep its shape and its other rows: %q", stored)
	}

	release(t, a, act)
	res := a.WaitAction(act)["result"].(map[string]any)
	if res["done_count"] != 2.0 || res["failed_count"] != 2.0 {
		t.Fatalf("the import's result: %v", res)
	}
	failed := map[float64]map[string]any{}
	for _, f := range res["failed"].([]any) {
		m := f.(map[string]any)
		failed[m["row"].(float64)] = m
	}
	if f := failed[1]; f == nil || f["line"] != 2.0 || f["reason"] != async.ErasedItem || f["source_id"] != nil {
		t.Errorf("her row's failure: %v", failed[1])
	}
	if f := failed[3]; f == nil || f["line"] != 5.0 || f["source_id"] != "zed-csv" {
		t.Errorf("the short row's failure: %v", failed[3])
	}
	if n := customersNaming(t, a, values); n != 0 {
		t.Errorf("%d customers named by her values after the import", n)
	}
	if c := a.OK("GET", "/v1/customers/yan-csv", nil); c["name"] != "Yan\nTwo" {
		t.Errorf("the other row: %v", c)
	}
	a.OK("GET", "/v1/customers/amy-csv", nil)
	// An import made afterwards that names her id is refused as a single
	// write is: the id is not used again.
	res = finished(a, upload(a, "/v1/customers/importCSV", "file", []byte("id,name\n"+xena+",Someone\n")))["result"].(map[string]any)
	if f, _ := res["failed"].([]any); len(f) != 1 || !strings.Contains(f[0].(map[string]any)["reason"].(string), "was permanently deleted") {
		t.Errorf("an import naming her id: %v", res)
	}
}

// A job run while a deletion's erasure is not finished (its task held by
// an export's row, as TestPermanentDeletionErasesWhatIsRetainedInTheBackground
// holds it) has not had its input redacted yet: it finds the customer's
// values in the unfinished erasure and skips her item all the same.
func TestABulkUpdateRunDuringAnErasureSkipsTheCustomer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	values := []string{"xena-during", "Xena During", "xena.during@example.com"}
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-during", "name": "Xena During",
		"email": "xena.during@example.com"})["id"].(string)
	exp := a.OK("POST", "/v1/exports", map[string]any{"exported_object": "customer"})["id"].(string)
	stacktest.Eventually(t, 10*time.Second, "the export", func() bool { return a.OK("GET", "/v1/exports/"+exp, nil)["status"] == "DONE" })
	act := heldJob(t, a, customers.JobMetadataUpdate, []byte(`{"source_ids":["yan-during","xena-during"],"metadata":{"tier":"gold"}}`))

	ctx := context.Background()
	lock, err := a.E.Stack.Regional["api"].Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM exports WHERE project_id = $1 AND id = $2 FOR UPDATE`, a.P.ID, exp); err != nil {
		t.Fatal(err)
	}
	a.DeletePermanently(xena)
	release(t, a, act)
	res := a.WaitAction(act)["result"].(map[string]any)
	if erasuresPending(t, a) != 1 {
		t.Fatal("the erasure finished while held")
	}
	errs, _ := res["errors"].([]any)
	if res["done_count"] != 1.0 || res["failed_count"] != 1.0 || len(errs) != 1 ||
		errs[0].(map[string]any)["details"] != async.ErasedItem || errs[0].(map[string]any)["source_id"] != nil {
		t.Fatalf("the job's result: %v", res)
	}
	if n := customersNaming(t, a, values); n != 0 {
		t.Errorf("%d customers named by her values after the job", n)
	}
	if c := a.OK("GET", "/v1/customers/yan-during", nil); c["metadata"].(map[string]any)["tier"] != "gold" {
		t.Errorf("the other item: %v", c)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a.WaitErasures()
}
