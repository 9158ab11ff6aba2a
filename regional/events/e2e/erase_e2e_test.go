package e2e_test

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/events"
)

// A bulk of events queued before a customer's permanent deletion and run
// after it: her event, which would make a customer of her source_id
// again, is refused as naming a customer deleted; the other is stored.
// The job is queued as its route queues it, due only in an hour, and let
// run once the erasure is done.
func TestABulkOfEventsQueuedBeforeAPermanentDeletionDoesNotBringTheCustomerBack(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	schema(a, "ping", map[string]any{})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "zoe-ev", "name": "Zoe Evented",
		"email": "zoe.ev@example.com"}})
	zoe := a.OK("GET", "/v1/customers/zoe-ev", nil)["id"].(string)
	input := `[{"event":"ping","customer":{"source_id":"zoe-ev","email":"zoe.ev@example.com"}},` +
		`{"event":"ping","customer":{"source_id":"kim-ev"}}]`
	act := a.HoldJob(events.BulkAction, map[string]int{"events": 2}, []byte(input))
	a.EraseNow(zoe)
	a.ReleaseJob(act)
	res := a.WaitAction(act)["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if res["stored"] != 1.0 || res["failed"] != 1.0 || len(errs) != 1 || errs[0].(map[string]any)["index"] != 0.0 ||
		errs[0].(map[string]any)["message"] != async.ErasedItem {
		t.Fatalf("the bulk's result: %v", res)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM customers WHERE project_id = $1 AND (source_id = 'zoe-ev' OR email = 'zoe.ev@example.com')`,
		a.P.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d customers of hers after the bulk (%v)", n, err)
	}
	a.OK("GET", "/v1/customers/kim-ev", nil)
}
