package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/segments"
)

// An auto-update segment on events.purchase.count $count_more [2] takes a
// customer in when their third purchase is recorded (in the asynchronous
// phase, with customer.segment.entered), not one with two; the customers'
// list by segment and a validation rule on it see the same; a customer's
// permanent deletion takes their counts, so that made again they start
// from none.
func TestSegmentCountsCustomEvents(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.entered")
	r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "purchase", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 {
		t.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	purchase := func(source string) {
		t.Helper()
		stacktest.Eventually(t, 3*time.Second, "the event accepted", func() bool {
			r := a.Do("POST", "/v1/events", map[string]any{"event": "purchase", "customer": map[string]any{"source_id": source}})
			if r.Status != 200 && (r.Status != 400 || !strings.Contains(string(r.Body), "has no schema")) {
				t.Fatalf("event: %d %s", r.Status, r.Body)
			}
			return r.Status == 200
		})
	}
	ann := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})["id"].(string)
	bob := a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob"})["id"].(string)
	buyers := a.OK("POST", "/v1/segments", map[string]any{"name": "Buyers", "type": "auto-update",
		"filter": map[string]any{"events.purchase.count": map[string]any{"conditions": map[string]any{"$count_more": []any{2}}}}})["id"].(string)
	// Its first evaluation waits until every instance's events path knows
	// the filter counts purchases (another instance's cache of filters
	// lives 5 s): an event one of them stored meanwhile, unaware, is then
	// found by the evaluation, which reads the counts after it.
	var wait time.Duration
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT run_after - created_at FROM outbox
		WHERE project_id = $1 AND kind = 'job:'||$2`, a.P.ID, segments.JobSync).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if wait < 5*time.Second {
		t.Fatalf("the first evaluation of a segment counting events may run %v after it is made, before other instances know of it", wait)
	}
	stacktest.Eventually(t, 20*time.Second, "the first evaluation", func() bool {
		return a.OK("GET", "/v1/segments/"+buyers, nil)["initial_sync_status"] == "DONE"
	})
	for range 2 {
		purchase("ann")
		purchase("bob")
	}
	time.Sleep(300 * time.Millisecond) // two purchases enter nobody
	if n := hooks.Count("customer.segment.entered"); n != 0 {
		t.Fatalf("%d entries after two purchases each", n)
	}
	waitMembers(a, buyers)

	// A validation rule on the segment: Ann, with two, is refused.
	v := a.Voucher("BUYERS10", stacktest.PercentOff(10))
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "buyers", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "customer.segment", "conditions": map[string]any{"$is": []any{buyers}}},
			"logic": "1"}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments",
		map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	valid := func(source string) bool {
		return a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "BUYERS10"}},
			"order": stacktest.Order([2]int{5000, 1}), "customer": map[string]any{"source_id": source}})["valid"] == true
	}
	if valid("ann") {
		t.Fatal("BUYERS10: ann has bought twice only")
	}

	purchase("ann") // her third
	ev := hooks.Wait(t, "customer.segment.entered", 1)
	if ev["customer"].(map[string]any)["id"] != ann || ev["segment"].(map[string]any)["id"] != buyers {
		t.Fatalf("entered: %v", ev)
	}
	waitMembers(a, buyers, ann)
	if !valid("ann") || valid("bob") {
		t.Fatal("BUYERS10: ann (three purchases) must pass and bob (two) must not")
	}
	// A segment made now finds Ann by its first evaluation (the SQL way).
	later := a.OK("POST", "/v1/segments", map[string]any{"name": "Later", "type": "passive",
		"filter": map[string]any{"events.purchase.count": map[string]any{"conditions": map[string]any{"$more_than_equal": []any{3}}}}})["id"].(string)
	waitMembers(a, later, ann)

	// Erased, Ann leaves; made again, she has bought nothing.
	if r := a.Do("POST", "/v1/customers/"+ann+"/permanent-deletion", nil); r.Status != 200 {
		t.Fatalf("permanent deletion: %d %s", r.Status, r.Body)
	}
	waitMembers(a, buyers)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})
	purchase("ann")
	purchase("bob") // Bob's third
	ev = hooks.Wait(t, "customer.segment.entered", 2)
	if ev["customer"].(map[string]any)["id"] != bob {
		t.Fatalf("entered: %v", ev)
	}
	waitMembers(a, buyers, bob)
	waitMembers(a, later, bob)

	// The path's form and operators are checked when the segment is made.
	for _, f := range []map[string]any{
		{"events.purchase": map[string]any{"conditions": map[string]any{"$count_more": []any{2}}}},
		{"events.purchase.count": map[string]any{"conditions": map[string]any{"$contains": []any{"2"}}}},
	} {
		if r := a.Do("POST", "/v1/segments", map[string]any{"name": "Bad", "type": "auto-update", "filter": f}); r.Status != 400 ||
			!strings.Contains(string(r.Body), "events.purchase") {
			t.Errorf("%v: %d %s", f, r.Status, r.Body)
		}
	}

	// An event of a name no filter counts queues no evaluation of its
	// customer; one that a filter counts does.
	a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "visit", "schema": map[string]any{"properties": map[string]any{}}})
	cara := a.OK("POST", "/v1/customers", map[string]any{"source_id": "cara"})["id"].(string)
	pool := a.E.Stack.Regional["api"].Pool()
	follows := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE project_id = $1 AND kind = $2
			AND payload::text LIKE '%' || $3 || '%'`, a.P.ID, segments.KindCustomers, cara).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := follows()
	stacktest.Eventually(t, 3*time.Second, "the visit accepted", func() bool {
		return a.Do("POST", "/v1/events", map[string]any{"event": "visit", "customer": map[string]any{"source_id": "cara"}}).Status == 200
	})
	if n := follows(); n != before {
		t.Fatalf("a visit, which no filter counts, queued %d evaluations of its customer", n-before)
	}
	purchase("cara")
	if n := follows(); n != before+1 {
		t.Fatalf("a purchase, which a filter counts, queued %d evaluations of its customer, want 1", n-before)
	}
}
