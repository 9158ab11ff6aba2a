package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
)

// ranToEnd runs a held customer job to its end and answers its result.
func ranToEnd(t *testing.T, a stacktest.API, jobType string, input []byte) (string, map[string]any) {
	t.Helper()
	act := heldJob(t, a, jobType, input)
	release(t, a, act)
	got := a.WaitAction(act)
	if got["status"] != "DONE" {
		t.Fatalf("%s: %v", jobType, got)
	}
	return act, got["result"].(map[string]any)
}

// storedAction is the whole stored row of an async action as text.
func storedAction(t *testing.T, a stacktest.API, id string) string {
	t.Helper()
	var row string
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT row_to_json(a)::TEXT FROM async_actions a
		WHERE project_id = $1 AND id = $2`, a.P.ID, id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	return row
}

// Finished customer jobs (a bulk update, a metadata update and a CSV
// import) each refused her item because the project's schema does not
// allow the tier it asked for, quoting it. Her permanent deletion leaves
// none of those tiers in the jobs' results (stored, and as GET
// /v1/async-actions answers them) nor in the bulk update's report: her
// items say only that she was erased. Another customer's refusals keep
// their reasons, tier and all.
func TestFinishedJobsKeepNoneOfTheMetadataTheyRefusedForAnErasedCustomer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.CustomerTiers("gold", "silver")
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-refused", "name": "Xena Refused",
		"email": "xena.refused@example.com"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob-refused"})
	hers := []string{"xena-refused", "Xena Refused", "xena.refused@example.com", "platinum-xb", "diamond-xm", "opal-xc"}

	bulk, _ := json.Marshal([]map[string]any{
		{"source_id": "xena-refused", "metadata": map[string]any{"tier": "platinum-xb"}},
		{"source_id": "bob-refused", "metadata": map[string]any{"tier": "bronze-bb"}}})
	meta, _ := json.Marshal(map[string]any{"source_ids": []string{"xena-refused"}, "metadata": map[string]any{"tier": "diamond-xm"}})
	csv := []byte("source_id,tier\nxena-refused,opal-xc\nbob-refused,onyx-bc\n")
	jobs := map[string]string{}
	for jobType, input := range map[string][]byte{customers.JobBulkUpdate: bulk, customers.JobMetadataUpdate: meta,
		customers.JobImportCSV: csv} {
		act, res := ranToEnd(t, a, jobType, input)
		if !strings.Contains(fmt.Sprint(res), "actual value is '") {
			t.Fatalf("%s should quote the tier it refused: %v", jobType, res)
		}
		jobs[jobType] = act
	}

	a.EraseNow(xena)
	for jobType, act := range jobs {
		got := a.OK("GET", "/v1/async-actions/"+act, nil)
		if held := holdsAny(fmt.Sprint(got), hers); len(held) > 0 {
			t.Errorf("GET /v1/async-actions/%s (%s) holds %v: %v", act, jobType, held, got["result"])
		}
		if held := holdsAny(storedAction(t, a, act), hers); len(held) > 0 {
			t.Errorf("the stored action of %s holds %v: %s", jobType, held, storedAction(t, a, act))
		}
		if !strings.Contains(fmt.Sprint(got["result"]), async.ErasedItem) {
			t.Errorf("%s: her item should say she was erased: %v", jobType, got["result"])
		}
	}
	bulkRes := a.OK("GET", "/v1/async-actions/"+jobs[customers.JobBulkUpdate], nil)["result"].(map[string]any)
	errs := bulkRes["errors"].([]any)
	if len(errs) != 2 || errs[0].(map[string]any)["details"] != async.ErasedItem ||
		!strings.Contains(fmt.Sprint(errs[1].(map[string]any)["details"]), "actual value is 'bronze-bb'") ||
		errs[1].(map[string]any)["source_id"] != "bob-refused" {
		t.Errorf("the bulk update's errors: %v", errs)
	}
	csvRes := a.OK("GET", "/v1/async-actions/"+jobs[customers.JobImportCSV], nil)["result"].(map[string]any)
	if f := failedRows(csvRes); f[1]["reason"] != async.ErasedItem || f[1]["line"] != 2.0 ||
		!strings.Contains(fmt.Sprint(f[2]["reason"]), "actual value is 'onyx-bc'") || f[2]["source_id"] != "bob-refused" {
		t.Errorf("the import's failures: %v", csvRes["failed"])
	}
	reports, _ := bulkRes["reports"].([]any)
	if len(reports) != 1 {
		t.Fatalf("the bulk update's reports: %v", bulkRes["reports"])
	}
	f := a.E.Do(t, "GET", reports[0].(string), nil, nil)
	if f.Status != 200 || len(holdsAny(string(f.Body), hers)) > 0 || !strings.Contains(string(f.Body), "\n1,,FAILED,"+async.ErasedItem) ||
		!strings.Contains(string(f.Body), "\n2,bob-refused,FAILED,") || !strings.Contains(string(f.Body), "bronze-bb") {
		t.Errorf("the bulk update's report: %d %s", f.Status, f.Body)
	}
}

// A customers CSV import names her by her id only (no source_id) in a row
// that the schema refuses for its tier, in a chunk committed before her
// permanent deletion; the job is held before its second chunk. Nothing in
// her failure names her, but the erasure marked her row in the job's
// input: her failure in the checkpoint, and so in the result the job makes
// of it, says only that she was erased. Another customer's refused row in
// the same chunk keeps its reason.
func TestACustomerImportRunningDuringAPermanentDeletionKeepsNoneOfTheMetadataItRefusedForHer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.CustomerTiers("gold", "silver")
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-byid", "name": "Xena Byid"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "held-byid"})
	var b strings.Builder
	b.WriteString("id,source_id,tier\n")
	fmt.Fprintf(&b, "%s,,opal-xr\n", xena) // row 1: hers, by id
	b.WriteString(",bob-byid,onyx-br\n")   // row 2
	for i := 3; i <= 2000; i++ {
		fmt.Fprintf(&b, ",byid-%05d,gold\n", i)
	}
	b.WriteString(",held-byid,silver\n") // row 2001: the second chunk
	act := heldJob(t, a, customers.JobImportCSV, []byte(b.String()))

	ctx := context.Background()
	lock := firstChunkOnly(t, a, act, "held-byid")
	defer lock.Rollback(ctx)
	if cp, _ := actionRow(t, a, act); !strings.Contains(cp, "opal-xr") {
		t.Fatalf("the checkpoint should list her refused row before the deletion: %s", cp)
	}
	a.EraseNow(xena)
	if cp, _ := actionRow(t, a, act); strings.Contains(cp, "opal-xr") || !strings.Contains(cp, "onyx-br") {
		t.Errorf("the held job's checkpoint after the erasure: %s", cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	if res["done_count"] != 1999.0 || res["failed_count"] != 2.0 {
		t.Fatalf("the import's result: %v", res)
	}
	f := failedRows(res)
	if f[1]["reason"] != async.ErasedItem || f[1]["line"] != 2.0 ||
		!strings.Contains(fmt.Sprint(f[2]["reason"]), "actual value is 'onyx-br'") {
		t.Errorf("the import's failures: %v", res["failed"])
	}
	if row := storedAction(t, a, act); strings.Contains(row, "opal-xr") || strings.Contains(fmt.Sprint(got), "opal-xr") {
		t.Errorf("the action holds her refused tier: %s", row)
	}
}
