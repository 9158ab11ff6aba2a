package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/events"
)

// heldBulk queues a bulk of events of "ping" as its route does: her event
// (source_id yara-ev) first, with a birthdate that is hers and more (so
// refused, the reason quoting it), then one that renames the customer
// held-ev (which the test locks to hold the job after her refusal), then
// one of a new customer. It is due only once released.
func heldBulk(t *testing.T, a stacktest.API) (action, yara string) {
	t.Helper()
	schema(a, "ping", map[string]any{})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "yara-ev", "name": "Yara Evented",
		"birthdate": "1987-06-05"}})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "held-ev"}})
	yara = a.OK("GET", "/v1/customers/yara-ev", nil)["id"].(string)
	input := `[{"event":"ping","customer":{"source_id":"yara-ev","birthdate":"1987-06-05T10:00"}},` +
		`{"event":"ping","customer":{"source_id":"held-ev","name":"Held Renamed"}},` +
		`{"event":"ping","customer":{"source_id":"lee-ev"}}]`
	action = a.HoldJob(events.BulkAction, map[string]int{"events": 3}, []byte(input))
	return action, yara
}

// holdAfterHerRefusal locks held-ev's row, lets the bulk run and waits
// for its checkpoint to be past her refused event: the job waits on the
// lock in the next event's transaction until the returned transaction
// ends.
func holdAfterHerRefusal(t *testing.T, a stacktest.API, action string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, `SELECT 1 FROM customers WHERE project_id = $1 AND source_id = 'held-ev' FOR UPDATE`, a.P.ID); err != nil {
		t.Fatal(err)
	}
	a.ReleaseJob(action)
	stacktest.Eventually(t, 30*time.Second, "her event refused", func() bool {
		cp, _ := bulkRow(t, a, action)
		return strings.Contains(cp, `"next": 1`)
	})
	return lock
}

// bulkRow is the text of the bulk action's stored checkpoint and result.
func bulkRow(t *testing.T, a stacktest.API, id string) (checkpoint, result string) {
	t.Helper()
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT COALESCE(checkpoint::TEXT, ''),
		COALESCE(result::TEXT, '') FROM async_actions WHERE project_id = $1 AND id = $2`, a.P.ID, id).Scan(&checkpoint, &result); err != nil {
		t.Fatal(err)
	}
	return checkpoint, result
}

// A bulk of events whose first event, hers, was refused before her
// permanent deletion with a reason quoting her birthdate (with more
// after it), held on the next event: the erasure redacts the refusal in
// the running job's checkpoint, and the job, released, takes it as it is
// (not as another run's, which would stop it FAILED) and stores the
// rest. It is DONE, lists her event as refused saying only that she was
// erased, and its row holds none of her values.
func TestABulkOfEventsRunningDuringAPermanentDeletionKeepsNoneOfHerRefusal(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	values := []string{"1987-06-05", "yara-ev", "Yara Evented"}
	act, yara := heldBulk(t, a)
	lock := holdAfterHerRefusal(t, a, act)
	if cp, _ := bulkRow(t, a, act); !strings.Contains(cp, "1987-06-05T10:00") {
		t.Fatalf("the checkpoint should quote her birthdate before the deletion: %s", cp)
	}

	a.EraseNow(yara)
	if cp, _ := bulkRow(t, a, act); len(holdsAny(cp, values)) > 0 || !strings.Contains(cp, `"next": 1`) {
		t.Errorf("the held job's checkpoint after the erasure: %s", cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	if got["status"] != "DONE" {
		t.Fatalf("the bulk: %v", got)
	}
	res := got["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if res["stored"] != 2.0 || res["failed"] != 1.0 || len(errs) != 1 {
		t.Fatalf("the bulk's result: %v", res)
	}
	e := errs[0].(map[string]any)
	if e["index"] != 0.0 || e["message"] != async.ErasedItem {
		t.Errorf("her event's refusal: %v", e)
	}
	if held := holdsAny(fmt.Sprint(got), values); len(held) > 0 {
		t.Errorf("GET /v1/async-actions/%s holds %v: %v", act, held, res)
	}
	cp, stored := bulkRow(t, a, act)
	if held := holdsAny(cp+stored, values); len(held) > 0 {
		t.Errorf("the action's row holds %v: checkpoint %q, result %s", held, cp, stored)
	}
	if c := a.OK("GET", "/v1/customers/held-ev", nil); c["name"] != "Held Renamed" {
		t.Errorf("the held event's customer: %v", c)
	}
	a.OK("GET", "/v1/customers/lee-ev", nil)
}

// The same bulk, held the same way, with no deletion: her event's refusal
// is listed as it always was, quoting the birthdate refused.
func TestABulkOfEventsHeldAfterARefusalListsItAsBefore(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	act, _ := heldBulk(t, a)
	lock := holdAfterHerRefusal(t, a, act)
	if err := lock.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if got["status"] != "DONE" || res["stored"] != 2.0 || res["failed"] != 1.0 || len(errs) != 1 {
		t.Fatalf("the bulk: %v", got)
	}
	if e := errs[0].(map[string]any); e["index"] != 0.0 || !strings.Contains(fmt.Sprint(e["message"]), `got "1987-06-05T10:00"`) {
		t.Errorf("her event's refusal: %v", e)
	}
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
