package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/orders"
)

// Jobs that finished before her permanent deletion each refused an item of
// hers that names nothing of hers, quoting the tier it asked for her: a
// customers CSV row naming her by id only (listed by its row), an order
// whose customer object was her (listed by the order's source_id), an
// event of hers in a bulk (listed by its index). Their inputs, and so the
// erasure's marks, went when they finished; what the jobs recorded their
// failures concern (async_failure_subjects) ties them to her. After her
// deletion none of the tiers is in the jobs' stored rows or their answers,
// her failures say only that she was erased, nothing in the table names
// her any more, and another customer's failure in each job keeps its
// reason.
func TestFinishedJobsKeepNoneOfTheMetadataTheyRefusedForHerByAnotherName(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.CustomerTiers("gold", "silver")
	xena := a.OK("POST", "/v1/customers", map[string]any{"source_id": "xena-fin", "name": "Xena Finished"})["id"].(string)
	hers := []string{"xena-fin", "Xena Finished", "opal-fc", "ruby-fo", "jade-fe"}
	eventSchema(a)

	csv := fmt.Sprintf("id,source_id,tier\n%s,,opal-fc\n,bob-fin,onyx-bc\n", xena)
	csvAct, _ := ranToEnd(t, a, customers.JobImportCSV, []byte(csv))
	ordAct := ranJob(t, a, orders.JobImport, nil,
		`[{"source_id":"ord-x1","amount":1000,"customer":{"source_id":"xena-fin","metadata":{"tier":"ruby-fo"}}},`+
			`{"source_id":"ord-b2","amount":500,"customer":{"source_id":"bob-fin","metadata":{"tier":"onyx-bo"}}}]`)
	evAct := ranJob(t, a, events.BulkAction, map[string]int{"events": 2},
		`[{"event":"ping-fin","customer":{"source_id":"xena-fin","metadata":{"tier":"jade-fe"}}},`+
			`{"event":"ping-fin","customer":{"source_id":"bob-fin","metadata":{"tier":"onyx-be"}}}]`)
	acts := map[string]string{"csv": csvAct, "orders": ordAct, "events": evAct}
	for name, act := range acts {
		if row := storedAction(t, a, act); !strings.Contains(row, "actual value is '") || len(holdsAny(row, hers[2:])) != 1 {
			t.Fatalf("%s should quote the tier it refused for her: %s", name, row)
		}
	}

	a.EraseNow(xena)
	for name, act := range acts {
		got := a.OK("GET", "/v1/async-actions/"+act, nil)
		row := storedAction(t, a, act)
		if held := holdsAny(fmt.Sprint(got)+row, hers); len(held) > 0 {
			t.Errorf("%s: the action holds %v: %s", name, held, row)
		}
		res := fmt.Sprint(got["result"])
		if !strings.Contains(res, async.ErasedItem) || !strings.Contains(res, "actual value is 'onyx-b") {
			t.Errorf("%s: her failure should say she was erased, the other keep its reason: %s", name, res)
		}
	}
	var left int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT count(*) FROM async_failure_subjects
		WHERE project_id = $1 AND customer_ref IN ($2, 'xena-fin')`, a.P.ID, xena).Scan(&left); err != nil || left != 0 {
		t.Errorf("rows that name her after her erasure: %d (%v)", left, err)
	}
}

// ranJob runs a held job of actionType to its end and answers its id.
func ranJob(t *testing.T, a stacktest.API, actionType string, params any, input string) string {
	t.Helper()
	act := a.HoldJob(actionType, params, []byte(input))
	a.ReleaseJob(act)
	if got := a.WaitAction(act); got["status"] != "DONE" {
		t.Fatalf("%s: %v", actionType, got)
	}
	return act
}

// eventSchema makes the event ping-fin and waits until it is in force.
func eventSchema(a stacktest.API) {
	a.T.Helper()
	r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "ping-fin", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 {
		a.T.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	stacktest.Eventually(a.T, 3*time.Second, "the event schema in force", func() bool {
		return a.Do("POST", "/v1/events", map[string]any{"event": "ping-fin", "customer": map[string]any{"source_id": "warm-fin"}}).Status == 200
	})
}
