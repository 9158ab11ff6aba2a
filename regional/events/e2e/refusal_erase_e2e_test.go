package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/events"
)

// A bulk of events whose first event, hers, was refused before her
// permanent deletion because the customer schema does not allow the tier
// it gave her, quoting the tier (none of her values, and the refusal
// lists the event by index only), held on the next event: the erasure
// marked her event in the job's input, and the refusal at that index, in
// the checkpoint and so in the result, says only that she was erased.
// The refusal of another customer's event keeps its tier.
func TestABulkOfEventsRunningDuringAPermanentDeletionKeepsNoneOfTheMetadataItRefusedForHer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	a.CustomerTiers("gold", "silver")
	schema(a, "ping", map[string]any{})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "yara-evm", "name": "Yara Metaed"}})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "held-ev"}})
	yara := a.OK("GET", "/v1/customers/yara-evm", nil)["id"].(string)
	input := `[{"event":"ping","customer":{"source_id":"yara-evm","metadata":{"tier":"opal-ym"}}},` +
		`{"event":"ping","customer":{"source_id":"held-ev","name":"Held Renamed"}},` +
		`{"event":"ping","customer":{"source_id":"lee-evm","metadata":{"tier":"onyx-lm"}}}]`
	act := a.HoldJob(events.BulkAction, map[string]int{"events": 3}, []byte(input))
	lock := holdAfterHerRefusal(t, a, act)
	if cp, _ := bulkRow(t, a, act); !strings.Contains(cp, "opal-ym") {
		t.Fatalf("the checkpoint should quote the tier refused before the deletion: %s", cp)
	}

	a.EraseNow(yara)
	if cp, _ := bulkRow(t, a, act); strings.Contains(cp, "opal-ym") || !strings.Contains(cp, `"next": 1`) {
		t.Errorf("the held job's checkpoint after the erasure: %s", cp)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	got := a.WaitAction(act)
	res := got["result"].(map[string]any)
	errs, _ := res["errors"].([]any)
	if got["status"] != "DONE" || res["stored"] != 1.0 || res["failed"] != 2.0 || len(errs) != 2 {
		t.Fatalf("the bulk: %v", got)
	}
	if e := errs[0].(map[string]any); e["index"] != 0.0 || e["message"] != async.ErasedItem {
		t.Errorf("her event's refusal: %v", e)
	}
	if e := errs[1].(map[string]any); e["index"] != 2.0 || !strings.Contains(fmt.Sprint(e["message"]), "actual value is 'onyx-lm'") {
		t.Errorf("the other refusal: %v", e)
	}
	cp, stored := bulkRow(t, a, act)
	if strings.Contains(cp+stored+fmt.Sprint(got), "opal-ym") {
		t.Errorf("the action holds the tier refused for her: checkpoint %q, result %s", cp, stored)
	}
}
