package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/orders"
)

// An order import whose first order, hers, was refused in a chunk
// committed before her permanent deletion because the customer schema
// does not allow the tier its customer object gave her (the failure names
// the order, not her, and quotes the tier), held before its second chunk:
// the erasure marked her order in the job's input, and her failure, in
// the checkpoint and so in the result, says only that she was erased.
// Another customer's refused order keeps its reason.
func TestAnOrderImportRunningDuringAPermanentDeletionKeepsNoneOfTheMetadataItRefusedForHer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	a.CustomerTiers("gold", "silver")
	olga := a.OK("POST", "/v1/customers", map[string]any{"source_id": "olga-ref", "name": "Olga Refused"})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "held-ord"})
	var b strings.Builder
	b.WriteString(`[{"source_id":"ord-olga","amount":1000,"customer":{"source_id":"olga-ref","metadata":{"tier":"opal-or"}}},`)
	b.WriteString(`{"source_id":"ord-kim","amount":500,"customer":{"source_id":"kim-ref","metadata":{"tier":"onyx-kr"}}}`)
	for i := 3; i <= 1000; i++ {
		fmt.Fprintf(&b, `,{"source_id":"ord-%04d","amount":100}`, i)
	}
	b.WriteString(`,{"source_id":"ord-held","amount":100,"customer":{"source_id":"held-ord","name":"Held Renamed"}}]`)
	act := a.HoldJob(orders.JobImport, nil, []byte(b.String()))

	checkpoint := func() string {
		var cp string
		if err := pool.QueryRow(ctx, `SELECT COALESCE(checkpoint::TEXT, '') || COALESCE(result::TEXT, '') FROM async_actions
			WHERE project_id = $1 AND id = $2`, a.P.ID, act).Scan(&cp); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM customers WHERE project_id = $1 AND source_id = 'held-ord' FOR UPDATE`, a.P.ID); err != nil {
		t.Fatal(err)
	}
	a.ReleaseJob(act)
	stacktest.Eventually(t, 30*time.Second, "the first chunk committed", func() bool {
		return strings.Contains(checkpoint(), `"next": 1000`)
	})
	if cp := checkpoint(); !strings.Contains(cp, "opal-or") {
		t.Fatalf("the checkpoint should quote the tier refused for her before the deletion: %s", cp)
	}
	a.EraseNow(olga)
	if cp := checkpoint(); strings.Contains(cp, "opal-or") || !strings.Contains(cp, "onyx-kr") {
		t.Errorf("the held job's checkpoint after the erasure: %s", cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	failed, _ := res["failed"].([]any)
	if res["done_count"] != 999.0 || res["failed_count"] != 2.0 || len(failed) != 2 {
		t.Fatalf("the import's result: %v", res)
	}
	if f := failed[0].(map[string]any); f["row"] != 1.0 || f["reason"] != async.ErasedItem {
		t.Errorf("her order's failure: %v", f)
	}
	if f := failed[1].(map[string]any); f["row"] != 2.0 || !strings.Contains(fmt.Sprint(f["reason"]), "actual value is 'onyx-kr'") {
		t.Errorf("the other failure: %v", f)
	}
	if row := checkpoint(); strings.Contains(row+fmt.Sprint(got), "opal-or") {
		t.Errorf("the action holds the tier refused for her: %s", row)
	}
}
