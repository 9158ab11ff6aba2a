package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
)

// chunkedImport is a customers CSV of two chunks (the job writes 2,000
// rows a transaction): its first row names the customer xena-chunk and
// fails for a reason of its own (a birthdate that is not one), the rest
// of the first chunk makes customers, and the second chunk updates the
// customer held-chunk2, which a test locks to hold the job between its
// chunks.
func chunkedImport() []byte {
	var b strings.Builder
	b.WriteString("source_id,name,email,birthdate\n")
	b.WriteString("xena-chunk,Xena Chunkley,xena.chunk@example.com,31/12/1990\n") // row 1, line 2
	for i := 2; i <= 2000; i++ {
		fmt.Fprintf(&b, "chunk-%05d,,,\n", i)
	}
	b.WriteString("held-chunk2,Held Two,,\n") // row 2001: the second chunk
	b.WriteString("chunk-02002,,,\n")
	return []byte(b.String())
}

// actionRow is the text of an async action's stored result and
// checkpoint (what the erasure must have taken her values from).
func actionRow(t *testing.T, a stacktest.API, id string) (checkpoint, result string) {
	t.Helper()
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT COALESCE(checkpoint::TEXT, ''),
		COALESCE(result::TEXT, '') FROM async_actions WHERE project_id = $1 AND id = $2`, a.P.ID, id).Scan(&checkpoint, &result); err != nil {
		t.Fatal(err)
	}
	return checkpoint, result
}

// failedRows are a CSV import result's failures by row.
func failedRows(res map[string]any) map[float64]map[string]any {
	out := map[float64]map[string]any{}
	for _, f := range res["failed"].([]any) {
		m := f.(map[string]any)
		out[m["row"].(float64)] = m
	}
	return out
}

// firstChunkOnly releases the held job act with the customer heldSourceID
// locked (an item of its second chunk updates her) and waits until its
// first chunk has committed: the job then waits on the lock, between its
// chunks, until the returned transaction ends.
func firstChunkOnly(t *testing.T, a stacktest.API, act, heldSourceID string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	lock, err := a.E.Stack.Regional["api"].Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT 1 FROM customers WHERE project_id = $1 AND source_id = $2 FOR UPDATE`, a.P.ID, heldSourceID); err != nil {
		_ = lock.Rollback(ctx)
		t.Fatal(err)
	}
	release(t, a, act)
	stacktest.Eventually(t, 30*time.Second, "the first chunk committed", func() bool {
		cp, _ := actionRow(t, a, act)
		return strings.Contains(cp, `"next": 2000`)
	})
	return lock
}

// A customer's row that failed for a reason of its own in a chunk the
// import committed before her permanent deletion is listed in the job's
// checkpoint with her source_id. The erasure takes it from there while
// the job is held before its second chunk, and the job, released, does
// not write it back from what it held in memory: neither the checkpoint
// nor the finished result (stored, and as GET /v1/async-actions answers
// it) holds her values; her row is still listed failed, by row, line and
// reason, which says she was erased (it quoted the birthdate the row gave).
func TestACustomerImportRunningDuringAPermanentDeletionKeepsNoneOfHerFailedRow(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	values := []string{"xena-chunk", "Xena Chunkley", "xena.chunk@example.com"}
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-chunk", "name": "Xena Chunkley",
		"email": "xena.chunk@example.com"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "held-chunk2"})
	act := heldJob(t, a, customers.JobImportCSV, chunkedImport())

	ctx := context.Background()
	lock := firstChunkOnly(t, a, act, "held-chunk2")
	defer lock.Rollback(ctx)
	if cp, _ := actionRow(t, a, act); len(holdsAny(cp, values)) == 0 {
		t.Fatalf("the checkpoint should list her failed row before the deletion: %s", cp)
	}

	a.EraseNow(xena)
	if cp, _ := actionRow(t, a, act); len(holdsAny(cp, values)) > 0 || !strings.Contains(cp, `"next": 2000`) {
		t.Errorf("the held job's checkpoint after the erasure holds %v: %s", holdsAny(cp, values), cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	if res["done_count"] != 2001.0 || res["failed_count"] != 1.0 {
		t.Fatalf("the import's result: done %v, failed %v", res["done_count"], res["failed_count"])
	}
	f := failedRows(res)[1]
	if f == nil || f["line"] != 2.0 || f["source_id"] != nil || f["reason"] != async.ErasedItem {
		t.Errorf("her row's failure: %v", f)
	}
	if held := holdsAny(fmt.Sprint(got), values); len(held) > 0 {
		t.Errorf("GET /v1/async-actions/%s holds %v: %v", act, held, f)
	}
	cp, stored := actionRow(t, a, act)
	if held := holdsAny(cp+stored, values); len(held) > 0 {
		t.Errorf("the action's row holds %v: checkpoint %q, result %.300s", held, cp, stored)
	}
	if n := customersNaming(t, a, values); n != 0 {
		t.Errorf("%d customers named by her values after the import", n)
	}
	a.Fails("GET", "/v1/customers/"+xena, nil, 404, "not_found")
	if c := a.OK("GET", "/v1/customers/held-chunk2", nil); c["name"] != "Held Two" {
		t.Errorf("the second chunk's row: %v", c)
	}
}

// The same import, held the same way, with no deletion: her failed row is
// listed as it always was, source_id and all.
func TestACustomerImportHeldBetweenChunksListsAFailedRowAsBefore(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-chunk", "name": "Xena Chunkley",
		"email": "xena.chunk@example.com"})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "held-chunk2"})
	act := heldJob(t, a, customers.JobImportCSV, chunkedImport())

	ctx := context.Background()
	lock := firstChunkOnly(t, a, act, "held-chunk2")
	defer lock.Rollback(ctx)
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	res := a.WaitAction(act)["result"].(map[string]any)
	if res["done_count"] != 2001.0 || res["failed_count"] != 1.0 || len(res["failed"].([]any)) != 1 {
		t.Fatalf("the import's result: %v", res)
	}
	want := map[string]any{"row": 1.0, "line": 2.0, "source_id": "xena-chunk",
		"reason": `Property birthdate must be a date in the form YYYY-MM-DD, got "31/12/1990".`}
	if f := failedRows(res)[1]; fmt.Sprint(f) != fmt.Sprint(want) {
		t.Errorf("her row's failure: %v, want %v", f, want)
	}
	if want := "2001 customer(s) imported successfully, 1 failed."; res["message"] != want {
		t.Errorf("message %q, want %q", res["message"], want)
	}
}

// The same for a bulk update, whose result lists the failed items as
// errors (with their source_id) and whose report lists every item: her
// item, refused by the project's metadata schema in the first chunk, is
// listed without her source_id in the result, and in neither the row nor
// the report does any of her values stay.
func TestABulkUpdateRunningDuringAPermanentDeletionKeepsNoneOfHerFailedItem(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.CustomerTiers("gold", "silver")
	values := []string{"xena-bulk2", "Xena Bulktwo", "xena.bulk2@example.com", "bronze"}
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-bulk2", "name": "Xena Bulktwo",
		"email": "xena.bulk2@example.com"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "held-bulk2"})
	items := []map[string]any{{"source_id": "xena-bulk2", "name": "Xena Bulktwo", "email": "xena.bulk2@example.com",
		"metadata": map[string]any{"tier": "bronze"}}}
	for i := 2; i <= 2000; i++ {
		items = append(items, map[string]any{"source_id": fmt.Sprintf("bulk2-%05d", i)})
	}
	items = append(items, map[string]any{"source_id": "held-bulk2", "name": "Held Two"})
	input, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	act := heldJob(t, a, customers.JobBulkUpdate, input)

	ctx := context.Background()
	lock := firstChunkOnly(t, a, act, "held-bulk2")
	defer lock.Rollback(ctx)
	if cp, _ := actionRow(t, a, act); len(holdsAny(cp, values)) == 0 {
		t.Fatalf("the checkpoint should list her failed item before the deletion: %s", cp)
	}
	a.EraseNow(xena)
	if cp, _ := actionRow(t, a, act); len(holdsAny(cp, values)) > 0 {
		t.Errorf("the held job's checkpoint after the erasure holds %v: %s", holdsAny(cp, values), cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if res["done_count"] != 2000.0 || res["failed_count"] != 1.0 || len(errs) != 1 {
		t.Fatalf("the job's result: done %v, failed %v, errors %v", res["done_count"], res["failed_count"], errs)
	}
	if e := errs[0].(map[string]any); e["source_id"] != nil || e["details"] != async.ErasedItem {
		t.Errorf("her item's failure: %v", e)
	}
	if held := holdsAny(fmt.Sprint(got), values); len(held) > 0 {
		t.Errorf("GET /v1/async-actions/%s holds %v", act, held)
	}
	cp, stored := actionRow(t, a, act)
	if held := holdsAny(cp+stored, values); len(held) > 0 {
		t.Errorf("the action's row holds %v: checkpoint %q, result %.300s", held, cp, stored)
	}
	reports, _ := res["reports"].([]any)
	if len(reports) != 1 {
		t.Fatalf("the job's reports: %v", res["reports"])
	}
	if f := a.E.Do(t, "GET", reports[0].(string), nil, nil); f.Status != 200 || len(holdsAny(string(f.Body), values)) > 0 ||
		!strings.Contains(string(f.Body), "\n1,,FAILED,"+async.ErasedItem) || !strings.Contains(string(f.Body), "\n2001,held-bulk2,SUCCESS") {
		t.Errorf("the report: %d %.200s … %s", f.Status, f.Body, f.Body[max(0, len(f.Body)-100):])
	}
	if n := customersNaming(t, a, values); n != 0 {
		t.Errorf("%d customers named by her values after the job", n)
	}
}
