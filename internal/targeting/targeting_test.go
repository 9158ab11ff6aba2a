package targeting

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/geo"
)

type rec struct {
	name string
	born time.Time
	meta map[string]any
	sent map[string]int
}

var schema = Schema[rec]{
	Fields: map[string]Field[rec]{
		"name":       {Kind: String, SQL: "name", Get: func(r rec) any { return r.name }},
		"created_at": {Kind: DateTime, SQL: "created_at", Get: func(r rec) any { return r.born }},
	},
	MetadataSQL: "meta",
	Metadata:    func(r rec) map[string]any { return r.meta },
	Events:      func(r rec, name string) int { return r.sent[name] },
}

// A filter that names a path or an operator the schema does not have, or
// gives an operator a value it cannot take, is refused with a 400 whose
// details name where.
func TestParseRefusesNamingWhere(t *testing.T) {
	for _, tc := range []struct{ filter, where string }{
		{`{"nickname": {"conditions": {"$is": ["a"]}}}`, "filter.nickname: unknown path"},
		{`{"name": {"conditions": {"$is_similar": ["a"]}}}`, "filter.name.conditions.$is_similar: unknown operator"},
		{`{"name": {"conditions": {"$more_than": [1]}}}`, "filter.name.conditions.$more_than: unknown operator"},
		{`{"created_at": {"conditions": {"$contains": ["2"]}}}`, "filter.created_at.conditions.$contains: unknown operator"},
		{`{"metadata.n": {"conditions": {"$more_than": ["many"]}}}`, "filter.metadata.n.conditions.$more_than: must be a number"},
		{`{"metadata.d": {"conditions": {"$after": ["yesterday"]}}}`, "filter.metadata.d.conditions.$after: must be a date"},
		{`{"created_at": {"conditions": {"$is_days_ago": [-1]}}}`, "filter.created_at.conditions.$is_days_ago: must be a number of days"},
		{`{"name": {"conditions": {"$count_more": [1]}}}`, "filter.name.conditions.$count_more: unknown operator"},
		{`{"name": {"conditions": {"$in_location": ["loc_1"]}}}`, "filter.name.conditions.$in_location: unknown operator"},
		{`{"metadata.tags": {"conditions": {"$count": [-1]}}}`, "filter.metadata.tags.conditions.$count: must be a count"},
		{`{"metadata.tags": {"conditions": {"$count_less": ["many"]}}}`, "filter.metadata.tags.conditions.$count_less: must be a count"},
		{`{"metadata.at": {"conditions": {"$in_location": [1]}}}`, "filter.metadata.at.conditions.$in_location: [0] must be a location id"},
		{`{"metadata.at": {"conditions": {"$in_location": []}}}`, "filter.metadata.at.conditions.$in_location: needs a value"},
		{`{"events.purchase": {"conditions": {"$count_more": [1]}}}`, "filter.events.purchase: an event path is events.<name>.count"},
		{`{"events..count": {"conditions": {"$count_more": [1]}}}`, "filter.events..count: an event path is events.<name>.count"},
		{`{"events.purchase.count": {"conditions": {"$contains": ["1"]}}}`, "filter.events.purchase.count.conditions.$contains: unknown operator"},
		{`{"events.purchase.count": {"conditions": {"$has_value": []}}}`, "filter.events.purchase.count.conditions.$has_value: unknown operator"},
		{`{"events.purchase.count": {"conditions": {"$count_more": [-1]}}}`, "filter.events.purchase.count.conditions.$count_more: must be a count"},
		{`{"events.purchase.count": {"conditions": {"$is": ["many"]}}}`, "filter.events.purchase.count.conditions.$is: must be a whole number"},
		{`{"events.purchase.count": {"conditions": {"$more_than": ["x"]}}}`, "filter.events.purchase.count.conditions.$more_than: must be a number"},
		{`{"name": {"conditions": {"$is": []}}}`, "filter.name.conditions.$is: needs a value"},
		{`{"name": {"$is": ["a"]}}`, "filter.name: must be an object such as"},
		{`{"junction": "xor"}`, "filter.junction: must be and or or"},
		{`[1]`, "filter: must be an object"},
		{`null`, "filter: must be an object"},
		{`{"metadata.": {"conditions": {"$is": ["a"]}}}`, "filter.metadata.: unknown path"},
	} {
		_, err := Parse(json.RawMessage(tc.filter), schema, "filter")
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.HasPrefix(ae.Details, tc.where) {
			t.Errorf("%s: %v, want 400 naming %q", tc.filter, err, tc.where)
		}
	}
	// Records without events to count (products) refuse the path.
	noEvents := schema
	noEvents.Events = nil
	_, err := Parse(json.RawMessage(`{"events.purchase.count": {"conditions": {"$count": [1]}}}`), noEvents, "filter")
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.HasPrefix(ae.Details, "filter.events.purchase.count: these records have no events") {
		t.Errorf("events on a schema without them: %v", err)
	}
}

// events.<name>.count compares a record's count of the events of that
// name, 0 when it sent none, by the counting, number and equality
// operators; EventNames lists the names a filter counts.
func TestEventCounts(t *testing.T) {
	r := rec{sent: map[string]int{"purchase": 3}}
	now := time.Now()
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{"events.purchase.count": {"conditions": {"$count_more": [2]}}}`, true},
		{`{"events.purchase.count": {"conditions": {"$count_more": [3]}}}`, false},
		{`{"events.purchase.count": {"conditions": {"$count": [3]}}}`, true},
		{`{"events.purchase.count": {"conditions": {"$count_less": [3]}}}`, false},
		{`{"events.purchase.count": {"conditions": {"$more_than_equal": [3]}}}`, true},
		{`{"events.purchase.count": {"conditions": {"$less_than": [3]}}}`, false},
		{`{"events.purchase.count": {"conditions": {"$is": [3]}}}`, true},
		{`{"events.purchase.count": {"conditions": {"$not_in": [1, 3]}}}`, false},
		{`{"events.visit.count": {"conditions": {"$count": [0]}}}`, true},
		{`{"events.visit.count": {"conditions": {"$is_not": [0]}}}`, false},
	} {
		f, err := Parse(json.RawMessage(tc.filter), schema, "filter")
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := f.Match(r, now, schema); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.filter, got, tc.want)
		}
	}
	f, err := Parse(json.RawMessage(`{"junction": "or", "events.a.count": {"conditions": {"$count": [1], "$is": [2]}},
		"events.b.count": {"conditions": {"$count": [1]}}}`), schema, "filter")
	if err != nil || strings.Join(f.EventNames(), ",") != "a,b" {
		t.Errorf("EventNames: %v, %v", f.EventNames(), err)
	}
}

// The junction is and/or in either case; a filter without conditions
// matches everything.
func TestJunctionsAndEmptyFilters(t *testing.T) {
	now := time.Now()
	r := rec{name: "Ann", born: now.Add(-48 * time.Hour), meta: map[string]any{"tier": "gold"}}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{}`, true},
		{`{"junction": "AND"}`, true},
		{`{"junction": "AND", "name": {"conditions": {"$is": ["Ann"]}}, "metadata.tier": {"conditions": {"$is": ["silver"]}}}`, false},
		{`{"junction": "OR", "name": {"conditions": {"$is": ["Ann"]}}, "metadata.tier": {"conditions": {"$is": ["silver"]}}}`, true},
		{`{"junction": "or", "name": {"conditions": {"$is": "Bob"}}, "metadata.tier": {"conditions": {"$is": "gold"}}}`, true},
		{`{"created_at": {"conditions": {"$more_than_ago": [1], "$less_than_ago": [3]}}}`, true},
		{`{"created_at": {"conditions": {"$is_days_ago": [2]}}}`, true},
		{`{"metadata.tier": {"conditions": {"$is_unknown": []}}}`, false},
	} {
		f, err := Parse(json.RawMessage(tc.filter), schema, "filter")
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := f.Match(r, now, schema); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.filter, got, tc.want)
		}
	}
}

// A filter names its locations once each; binding their shapes makes a
// new filter and leaves the compiled one (shared by a cache) unbound, and
// only $in_location makes Where a prefilter.
func TestBindLeavesTheCompiledFilter(t *testing.T) {
	f, err := Parse(json.RawMessage(`{"junction": "or", "metadata.at": {"conditions": {"$in_location": ["loc_a", "loc_b", "loc_a"]}},
		"metadata.n": {"conditions": {"$count_more": [1]}}}`), schema, "filter")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Locations(); len(got) != 2 || got[0] != "loc_a" || got[1] != "loc_b" || f.Exact() {
		t.Fatalf("locations %v, exact %v", got, f.Exact())
	}
	r := rec{meta: map[string]any{"at": "geo:1,1"}}
	b := f.Bind(map[string]geo.Shape{"loc_b": geo.Circle{Center: geo.Point{Lat: 1, Lng: 1}, Radius: 10}})
	if !b.Match(r, time.Now(), schema) || f.Match(r, time.Now(), schema) {
		t.Fatalf("bound %v, compiled %v: want the bound one only to hold the point", b.Match(r, time.Now(), schema), f.Match(r, time.Now(), schema))
	}
	exact, _ := Parse(json.RawMessage(`{"metadata.n": {"conditions": {"$count": [2]}}}`), schema, "filter")
	if !exact.Exact() || exact.Bind(nil) != exact || !exact.Match(rec{meta: map[string]any{"n": []any{1, "x"}}}, time.Now(), schema) {
		t.Fatal("a filter without $in_location is exact, bound as it is, and counts an array")
	}
}
