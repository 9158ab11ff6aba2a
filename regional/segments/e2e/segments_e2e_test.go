package e2e_test

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// members are the ids of a segment's customers, as GET
// /v1/customers?segment_id= lists them.
func members(a stacktest.API, segID string) []string {
	a.T.Helper()
	l := a.OK("GET", "/v1/customers?limit=100&segment_id="+segID, nil)
	var out []string
	for _, c := range l["customers"].([]any) {
		out = append(out, c.(map[string]any)["id"].(string))
	}
	sort.Strings(out)
	return out
}

func sorted(ids ...string) []string { s := slices.Clone(ids); sort.Strings(s); return s }

// waitMembers waits (the asynchronous phase) until a segment's members are
// want.
func waitMembers(a stacktest.API, segID string, want ...string) {
	a.T.Helper()
	want = sorted(want...)
	var got []string
	deadline := time.Now().Add(20 * time.Second) // a first evaluation may wait 6 s (Create)
	for time.Now().Before(deadline) {
		if got = members(a, segID); slices.Equal(got, want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.T.Fatalf("segment %s: members %v, want %v", segID, got, want)
}

func customerSegments(a stacktest.API, customer string) []string {
	a.T.Helper()
	l := a.OK("GET", "/v1/customers/"+customer+"/segments", nil)
	if l["object"] != "list" || l["data_ref"] != "data" {
		a.T.Fatalf("customer's segments: %v", l)
	}
	var out []string
	for _, s := range l["data"].([]any) {
		m := s.(map[string]any)
		if m["object"] != "segment" || m["name"] == "" {
			a.T.Fatalf("customer's segment: %v", m)
		}
		out = append(out, m["id"].(string))
	}
	sort.Strings(out)
	return out
}

// A static segment keeps the customers it was made with (by id or
// source_id) until they are deleted; an auto-update segment's members
// follow their customers' creation, updates and deletion, each entry and
// exit raised as a webhook with the customer and the segment (those there
// when it is made entering by its first evaluation); a passive segment
// follows them silently.
func TestSegmentMembershipFollowsCustomers(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.entered", "customer.segment.left")
	customer := func(body map[string]any) string { return a.OK("POST", "/v1/customers", body)["id"].(string) }
	ann := customer(map[string]any{"source_id": "ann", "name": "Ann", "metadata": map[string]any{"tier": "gold"}})
	bob := customer(map[string]any{"source_id": "bob", "name": "Bob", "address": map[string]any{"city": "Berlin"}})

	static := a.OK("POST", "/v1/segments", map[string]any{"name": "Friends", "type": "static", "customers": []any{"ann", bob}})
	if static["object"] != "segment" || static["type"] != "static" || static["initial_sync_status"] != "DONE" ||
		!strings.HasPrefix(static["id"].(string), "seg_") || static["filter"] != nil {
		t.Fatalf("static segment: %v", static)
	}
	staticID := static["id"].(string)
	if got := members(a, staticID); !slices.Equal(got, sorted(ann, bob)) {
		t.Fatalf("static members %v", got)
	}

	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"junction": "and", "metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})
	goldID := gold["id"].(string)
	if gold["type"] != "auto-update" || gold["initial_sync_status"] != "IN_PROGRESS" || gold["filter"] == nil {
		t.Fatalf("auto-update segment: %v", gold)
	}
	stacktest.Eventually(t, 10*time.Second, "the first evaluation", func() bool {
		return a.OK("GET", "/v1/segments/"+goldID, nil)["initial_sync_status"] == "DONE"
	})
	waitMembers(a, goldID, ann)
	// Ann, gold before the segment was made, enters it by its first
	// evaluation, with her notice as any entry (in the job's transaction).
	ev := hooks.Wait(t, "customer.segment.entered", 1)
	if ev["customer"].(map[string]any)["id"] != ann || ev["segment"].(map[string]any)["id"] != goldID {
		t.Fatalf("entered by the first evaluation: %v", ev)
	}
	berlin := a.OK("POST", "/v1/segments", map[string]any{"name": "Berliners", "type": "passive",
		"filter": map[string]any{"address.city": map[string]any{"conditions": map[string]any{"$in": []any{"Berlin"}}}}})["id"].(string)
	waitMembers(a, berlin, bob)

	// Bob turns gold: he enters, once.
	a.OK("PUT", "/v1/customers/bob", map[string]any{"metadata": map[string]any{"tier": "gold"}})
	ev = hooks.Wait(t, "customer.segment.entered", 2)
	if ev["customer"].(map[string]any)["id"] != bob || ev["segment"].(map[string]any)["id"] != goldID ||
		ev["segment"].(map[string]any)["object"] != "segment" {
		t.Fatalf("entered: %v", ev)
	}
	waitMembers(a, goldID, ann, bob)
	if got := customerSegments(a, "bob"); !slices.Equal(got, sorted(staticID, goldID, berlin)) {
		t.Fatalf("bob's segments %v", got)
	}
	// Ann turns silver: she leaves.
	a.OK("PUT", "/v1/customers/"+ann, map[string]any{"metadata": map[string]any{"tier": "silver"}})
	ev = hooks.Wait(t, "customer.segment.left", 1)
	if ev["customer"].(map[string]any)["id"] != ann || ev["segment"].(map[string]any)["id"] != goldID {
		t.Fatalf("left: %v", ev)
	}
	waitMembers(a, goldID, bob)
	// A new gold customer in Berlin enters Gold (the passive one silently).
	cy := customer(map[string]any{"name": "Cy", "address": map[string]any{"city": "Berlin"}, "metadata": map[string]any{"tier": "gold"}})
	hooks.Wait(t, "customer.segment.entered", 3)
	waitMembers(a, goldID, bob, cy)
	waitMembers(a, berlin, bob, cy)
	// Deleting Bob takes him out of every segment, static ones too.
	if r := a.Do("DELETE", "/v1/customers/"+bob, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	ev = hooks.Wait(t, "customer.segment.left", 2)
	if ev["customer"].(map[string]any)["id"] != bob {
		t.Fatalf("left on deletion: %v", ev)
	}
	waitMembers(a, goldID, cy)
	waitMembers(a, staticID, ann)
	waitMembers(a, berlin, cy)
	time.Sleep(300 * time.Millisecond) // any late notice would have come
	if n, m := hooks.Count("customer.segment.entered"), hooks.Count("customer.segment.left"); n != 3 || m != 2 {
		t.Fatalf("%d entered and %d left notices, want 3 and 2 (none of the passive segment)", n, m)
	}
	for _, e := range append(hooks.All("customer.segment.entered"), hooks.All("customer.segment.left")...) {
		if e["segment"].(map[string]any)["id"] != goldID {
			t.Fatalf("a notice of another segment than the auto-update one: %v", e)
		}
	}
	// The notices' data are the reference's event data of each type, the
	// customer (a deleted one by its id) and the segment's id, name and object.
	for typ, schema := range map[string]string{"customer.segment.entered": "EventCustomerSegmentEntered",
		"customer.segment.left": "EventCustomerSegmentLeft"} {
		for _, e := range hooks.All(typ) {
			stacktest.ConformsTo(t, schema, e)
		}
	}

	// The list, by id and by filter; a deleted segment is gone.
	l := a.OK("GET", "/v1/segments?order=name", nil)
	if l["total"] != float64(3) || l["data"].([]any)[0].(map[string]any)["name"] != "Berliners" {
		t.Fatalf("list: %v", l)
	}
	l = a.OK("GET", "/v1/segments?filters[type][conditions][$in][0]=static&filters[type][conditions][$in][1]=passive", nil)
	if l["total"] != float64(2) {
		t.Fatalf("filtered list: %v", l)
	}
	l = a.OK("GET", "/v1/segments?ids="+goldID, nil)
	if l["total"] != float64(1) || l["data"].([]any)[0].(map[string]any)["id"] != goldID {
		t.Fatalf("list by ids: %v", l)
	}
	if r := a.Do("DELETE", "/v1/segments/"+berlin, nil); r.Status != 204 {
		t.Fatalf("delete segment: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/segments/"+berlin, nil, 404, "not_found")
	a.Fails("DELETE", "/v1/segments/"+berlin, nil, 404, "not_found")
	a.Fails("GET", "/v1/customers?segment_id="+berlin, nil, 404, "not_found")
	if got := customerSegments(a, cy); !slices.Equal(got, []string{goldID}) {
		t.Fatalf("cy's segments after the deletion %v", got)
	}
}

// GET /v1/customers/{id}/segments of an id no customer has answers the
// filter segments a customer with no data would be in.
func TestUnknownCustomersSegments(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	nameless := a.OK("POST", "/v1/segments", map[string]any{"name": "Nameless", "type": "passive",
		"filter": map[string]any{"name": map[string]any{"conditions": map[string]any{"$is_unknown": []any{}}}}})["id"].(string)
	a.OK("POST", "/v1/segments", map[string]any{"name": "Named", "type": "passive",
		"filter": map[string]any{"name": map[string]any{"conditions": map[string]any{"$has_value": []any{}}}}})
	if got := customerSegments(a, "cust_nobody"); !slices.Equal(got, []string{nameless}) {
		t.Fatalf("segments of an unknown customer %v, want the nameless one", got)
	}
}

// A filter that names an unknown path or operator is refused when the
// segment is made, naming it; so are a static segment's unknown customers
// and a 101st filter segment.
func TestSegmentRefusals(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for _, tc := range []struct {
		body  map[string]any
		where string
	}{
		{map[string]any{"name": "x", "type": "auto-update", "filter": map[string]any{
			"shoe_size": map[string]any{"conditions": map[string]any{"$is": []any{"42"}}}}}, "filter.shoe_size: unknown path"},
		{map[string]any{"name": "x", "type": "passive", "filter": map[string]any{
			"address.city": map[string]any{"conditions": map[string]any{"$near": []any{"Oslo"}}}}}, "filter.address.city.conditions.$near"},
		{map[string]any{"name": "x", "type": "auto-update"}, "filter: must be an object"},
		{map[string]any{"name": "x", "type": "dynamic", "filter": map[string]any{}}, "type: must be static, auto-update or passive"},
		{map[string]any{"type": "static"}, "name:"},
		{map[string]any{"name": "x", "type": "static", "customers": []any{"nobody"}}, `customers[0]: no customer has the id or source_id "nobody"`},
	} {
		m := a.Fails("POST", "/v1/segments", tc.body, 400, "invalid_payload")
		if !strings.Contains(m["details"].(string), tc.where) {
			t.Errorf("%v: %v, want details naming %q", tc.body, m["details"], tc.where)
		}
	}
	for i := range 100 {
		a.OK("POST", "/v1/segments", map[string]any{"name": "s", "type": "passive",
			"filter": map[string]any{"metadata.n": map[string]any{"conditions": map[string]any{"$more_than": []any{i}}}}})
	}
	m := a.Fails("POST", "/v1/segments", map[string]any{"name": "one more", "type": "auto-update", "filter": map[string]any{}}, 400, "invalid_payload")
	if !strings.Contains(m["details"].(string), "at most 100") {
		t.Fatalf("101st: %v", m)
	}
	a.OK("POST", "/v1/segments", map[string]any{"name": "static ones are not counted", "type": "static", "customers": []any{}})
}

// Customers written in bulk (the bulk update and the metadata update, as
// async actions) join and leave segments as single writes do, with their
// notices; a filter segment made over existing customers finds them all by
// its first evaluation, in several chunks (export_test.go).
func TestBulkWritesMoveCustomersBetweenSegments(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.entered", "customer.segment.left")
	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})["id"].(string)
	var bulk []any
	var sources []any
	for i := range 30 {
		tier := "silver"
		if i%3 == 0 {
			tier = "gold"
		}
		src := "c-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		bulk = append(bulk, map[string]any{"source_id": src, "metadata": map[string]any{"tier": tier}})
		sources = append(sources, src)
	}
	wait := func(r stacktest.Resp) {
		if r.Status != 202 {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		a.WaitAction(r.JSON(t)["async_action_id"].(string))
	}
	wait(a.Do("POST", "/v1/customers/bulk/async", bulk))
	stacktest.Eventually(t, 10*time.Second, "10 gold members", func() bool { return len(members(a, gold)) == 10 })
	hooks.Wait(t, "customer.segment.entered", 10)
	// Every one of them gold now, by the metadata update: 20 more enter.
	wait(a.Do("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": sources, "metadata": map[string]any{"tier": "gold"}}))
	stacktest.Eventually(t, 10*time.Second, "30 gold members", func() bool { return len(members(a, gold)) == 30 })
	hooks.Wait(t, "customer.segment.entered", 30)
	// A segment made now finds the 30 by its first evaluation.
	later := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold too", "type": "passive",
		"filter": map[string]any{"metadata.tier": map[string]any{"conditions": map[string]any{"$in": []any{"gold", "platinum"}}}}})["id"].(string)
	stacktest.Eventually(t, 10*time.Second, "the first evaluation", func() bool { return len(members(a, later)) == 30 })
	if n := hooks.Count("customer.segment.left"); n != 0 {
		t.Fatalf("%d left notices, want none", n)
	}
}
