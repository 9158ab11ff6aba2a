package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/orders"
)

// An order import queued before a customer's permanent deletion and run
// after it: the erasure redacted her order's customer object in the stored
// input, and the import reports that order failed (no source_id, the
// reason saying why) rather than make a customer of her again; the other
// order is imported. The job is queued as its route queues it, due only
// in an hour, and let run once the erasure is done.
func TestAnOrderImportQueuedBeforeAPermanentDeletionDoesNotBringTheCustomerBack(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	values := []string{"olga-ord", "Olga Ordered", "olga.ord@example.com"}
	olga := a.OK("POST", "/v1/customers", map[string]any{"source_id": "olga-ord", "name": "Olga Ordered",
		"email": "olga.ord@example.com"})["id"].(string)
	input := `[{"source_id":"ord-olga","amount":1000,"customer":{"source_id":"olga-ord","name":"Olga Ordered"}},` +
		`{"source_id":"ord-kim","amount":500,"customer":{"source_id":"kim-ord"}}]`
	act := a.HoldJob(orders.JobImport, nil, []byte(input))
	a.EraseNow(olga)
	var stored string
	if err := pool.QueryRow(ctx, `SELECT string_agg(convert_from(data, 'UTF8'), '' ORDER BY part) FROM async_inputs
		WHERE project_id = $1 AND action_id = $2`, a.P.ID, act).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if strings.Contains(stored, v) {
			t.Errorf("the stored import still holds %q: %s", v, stored)
		}
	}
	a.ReleaseJob(act)
	res := a.WaitAction(act)["result"].(map[string]any)
	failed, _ := res["failed"].([]any)
	if res["done_count"] != 1.0 || res["failed_count"] != 1.0 || len(failed) != 1 {
		t.Fatalf("the import's result: %v", res)
	}
	if f := failed[0].(map[string]any); f["row"] != 1.0 || f["reason"] != async.ErasedItem || f["source_id"] != nil {
		t.Errorf("her order's failure: %v", f)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM customers WHERE project_id = $1 AND (source_id = ANY($2) OR name = ANY($2) OR email = ANY($2))`,
		a.P.ID, values).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d customers of hers after the import (%v)", n, err)
	}
	a.Fails("GET", "/v1/orders/ord-olga", nil, 404, "not_found")
	a.OK("GET", "/v1/orders/ord-kim", nil)
}
