package segments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/geo"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/metaschemas"
	"github.com/tallyhq/tally/regional/regionaltest"
	"github.com/tallyhq/tally/regional/webhooks"
)

type noNotices struct{}

func (noNotices) Emit(context.Context, db.Querier, webhooks.Notice) error  { return nil }
func (noNotices) Queue(context.Context, *pgx.Batch, webhooks.Notice) error { return nil }

// A filter's SQL (the bulk evaluation of a segment) and its Go predicate
// (a single customer's change, a request's customer) agree on every
// customer of a varied set, for every operator on every kind of path.
func TestFilterSQLAndGoAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := regionaltest.Open(t, regionaltest.Database(t))
	svc := customers.NewService(pool, noNotices{}, (*metaschemas.Checker)(nil), nil, customers.Erasers{})
	now := time.Now().UTC()
	day := func(n int) string { return now.AddDate(0, 0, n).Format(time.DateOnly) }
	bodies := []string{
		`{}`,
		`{"name": "Ann", "email": "ann@example.com", "birthdate": "1990-02-03", "address": {"city": "Oslo", "country": "NO"}}`,
		`{"name": "Bob", "email": "bob@example.org", "phone": "+47 1", "address": {"city": "Berlin"}, "metadata": {"tier": "gold", "age": 30}}`,
		`{"name": "ann", "metadata": {"tier": "silver", "age": 17.5, "vip": true, "since": "` + day(-3) + `"}}`,
		`{"name": "", "metadata": {"tier": null, "age": "30", "since": "` + day(5) + `T10:00:00Z", "tags": ["a"]}}`,
		`{"name": "Zoë Ünïcode", "birthdate": "` + day(-10) + `", "metadata": {"age": 0, "since": "not a date", "obj": {"a": 1}}}`,
		`{"name": "Cy", "birthdate": "` + day(0) + `", "metadata": {"age": -4, "since": "` + day(0) + `"}}`,
		`{"name": "Di", "birthdate": "` + day(7) + `", "metadata": {"age": 1000000, "since": "` + day(-30) + `", "tier": "Gold"}}`,
		`{"source_id": "src-9", "address": {"city": null}, "metadata": {"vip": false}}`,
	}
	bodies = append(bodies, placeBodies...)
	var ids []string
	for i, b := range bodies {
		var p customers.Patch
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		c, _, err := svc.Upsert(ctx, "proj_x", &p)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		ids = append(ids, c.ID)
	}
	now = time.Now().UTC() // after the creations, so that created_at is in the past
	all := withEvents(ctx, t, pool, ids)
	filters := []string{
		`{}`,
		`{"name": {"conditions": {"$is": ["Ann"]}}}`,
		`{"name": {"conditions": {"$is_not": ["Ann"]}}}`,
		`{"name": {"conditions": {"$in": ["Ann", "Bob", ""]}}}`,
		`{"name": {"conditions": {"$not_in": ["Ann", "Bob"]}}}`,
		`{"name": {"conditions": {"$contains": ["nn"]}}}`,
		`{"name": {"conditions": {"$not_contain": ["o"]}}}`,
		`{"name": {"conditions": {"$starts_with": ["Zo"]}}}`,
		`{"name": {"conditions": {"$ends_with": ["ode", "y"]}}}`,
		`{"name": {"conditions": {"$has_value": []}}}`,
		`{"name": {"conditions": {"$is_unknown": []}}}`,
		`{"email": {"conditions": {"$ends_with": ["example.com"]}}, "address.city": {"conditions": {"$is": ["Oslo"]}}}`,
		`{"junction": "OR", "email": {"conditions": {"$ends_with": ["example.org"]}}, "address.city": {"conditions": {"$is": ["Oslo"]}}}`,
		`{"address.city": {"conditions": {"$is_unknown": []}}}`,
		`{"address.country": {"conditions": {"$in": ["NO", "SE"]}}}`,
		`{"source_id": {"conditions": {"$has_value": []}}}`,
		`{"phone": {"conditions": {"$starts_with": ["+47"]}}}`,
		`{"birthdate": {"conditions": {"$before": ["2000-01-01"]}}}`,
		`{"birthdate": {"conditions": {"$after": ["` + day(-1) + `"]}}}`,
		`{"birthdate": {"conditions": {"$is_days_ago": [10]}}}`,
		`{"birthdate": {"conditions": {"$is_days_in_future": [7]}}}`,
		`{"birthdate": {"conditions": {"$more_than_ago": [5]}}}`,
		`{"birthdate": {"conditions": {"$less_than_ago": [11]}}}`,
		`{"birthdate": {"conditions": {"$more_than_future": [3]}}}`,
		`{"birthdate": {"conditions": {"$less_than_future": [8]}}}`,
		`{"created_at": {"conditions": {"$more_than_ago": [1]}}}`,
		`{"created_at": {"conditions": {"$less_than_ago": [1]}}}`,
		`{"created_at": {"conditions": {"$is_days_ago": [0]}}}`,
		`{"created_at": {"conditions": {"$after": ["2020-01-01T00:00:00Z"]}}}`,
		`{"updated_at": {"conditions": {"$is_unknown": []}}}`,
		`{"metadata.tier": {"conditions": {"$is": ["gold"]}}}`,
		`{"metadata.tier": {"conditions": {"$is_not": ["gold"]}}}`,
		`{"metadata.tier": {"conditions": {"$has_value": []}}}`,
		`{"metadata.tier": {"conditions": {"$is_unknown": []}}}`,
		`{"metadata.age": {"conditions": {"$is": [30]}}}`,
		`{"metadata.age": {"conditions": {"$more_than": [18]}}}`,
		`{"metadata.age": {"conditions": {"$less_than_equal": [0]}}}`,
		`{"metadata.age": {"conditions": {"$more_than_equal": ["17.5"]}, "junction": "and"}}`,
		`{"metadata.age": {"conditions": {"$less_than": [-1]}}}`,
		`{"metadata.vip": {"conditions": {"$is": [true]}}}`,
		`{"metadata.vip": {"conditions": {"$is": ["false"]}}}`,
		`{"metadata.since": {"conditions": {"$less_than_ago": [7]}}}`,
		`{"metadata.since": {"conditions": {"$more_than_ago": [7]}}}`,
		`{"metadata.since": {"conditions": {"$is_days_in_future": [5]}}}`,
		`{"metadata.since": {"conditions": {"$after": ["` + day(-1) + `"]}}}`,
		`{"metadata.since": {"conditions": {"$is_days_ago": [0]}}}`,
		`{"metadata.obj": {"conditions": {"$has_value": []}}}`,
		`{"metadata.obj": {"conditions": {"$contains": ["a"]}}}`,
		`{"metadata.tags": {"conditions": {"$not_contain": ["a"]}}}`,
		`{"metadata.missing": {"conditions": {"$is_unknown": []}}}`,
		`{"junction": "or", "metadata.tier": {"conditions": {"$in": ["gold", "Gold"]}}, "name": {"conditions": {"$is": ["Cy"]}}}`,
	}
	for _, raw := range append(append(filters, placeFilters...), eventFilters...) {
		f, err := targeting.Parse(json.RawMessage(raw), customers.Targets, "filter")
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		f = f.Bind(shapes)
		var goIDs []string
		for _, c := range all {
			if f.Match(c, now, targets) {
				goIDs = append(goIDs, c.ID)
			}
		}
		sqlIDs := sqlMatches(ctx, t, pool, raw, f, now)
		if !f.Exact() {
			sqlIDs = refined(t, raw, f, all, goIDs, sqlIDs, now)
		}
		slices.Sort(goIDs)
		slices.Sort(sqlIDs)
		if !slices.Equal(goIDs, sqlIDs) {
			t.Errorf("%s: Go matches %d %v, SQL %d %v", raw, len(goIDs), names(all, goIDs), len(sqlIDs), names(all, sqlIDs))
		}
		if w, ok := want[raw]; ok && !slices.Equal(slices.Sorted(slices.Values(names(all, goIDs))), slices.Sorted(slices.Values(w))) {
			t.Errorf("%s: holds %v, want %v", raw, names(all, goIDs), w)
		}
	}
}

// placeBodies are customers with geopoints for $in_location (the shapes
// below) and arrays for $count.
var placeBodies = []string{
	`{"name": "In the triangle", "metadata": {"at": "geo:52.1,13.1", "tags": []}}`,
	`{"name": "In the hole", "metadata": {"at": "geo:52.25,13.25", "tags": ["a", "b"]}}`,
	`{"name": "Triangle box only", "metadata": {"at": "geo:52.9,13.9", "tags": ["a", "b", "c"]}}`,
	`{"name": "In the circle", "metadata": {"at": "GEO: 48.86 , 2.36", "tags": "a"}}`,
	`{"name": "Circle box only", "metadata": {"at": "geo:48.89,2.41"}}`,
	`{"name": "In the circle, with an exponent", "metadata": {"at": "geo:4.886e1,2.36"}}`,
	`{"name": "One of many in the triangle", "metadata": {"at": ["geo:0,0", "geo:52.1,13.1"]}}`,
	`{"name": "Far away", "metadata": {"at": "geo:10,10"}}`,
	`{"name": "Not a point", "metadata": {"at": "the station"}}`,
	`{"name": "A number", "metadata": {"at": 52.1}}`,
	`{"name": "Off the Earth", "metadata": {"at": "geo:95,13.5"}}`,
}

// placeFilters are the filters of $count and $in_location.
var placeFilters = []string{
	`{"metadata.tags": {"conditions": {"$count": [0]}}}`,
	`{"metadata.tags": {"conditions": {"$count": [1]}}}`,
	`{"metadata.tags": {"conditions": {"$count_less": [3]}}}`,
	`{"metadata.tags": {"conditions": {"$count_more": [1]}}}`,
	`{"junction": "or", "metadata.tags": {"conditions": {"$count_more": [2]}}, "name": {"conditions": {"$is": ["Ann"]}}}`,
	`{"metadata.at": {"conditions": {"$in_location": ["loc_triangle"]}}}`,
	`{"metadata.at": {"conditions": {"$in_location": ["loc_circle", "loc_gone"]}}}`,
	`{"metadata.at": {"conditions": {"$in_location": ["loc_gone"]}}}`,
	`{"metadata.at": {"conditions": {"$in_location": ["loc_triangle", "loc_circle"]}}, "metadata.tags": {"conditions": {"$count_less": [3]}}}`,
	`{"junction": "or", "metadata.at": {"conditions": {"$in_location": ["loc_triangle"]}}, "name": {"conditions": {"$is": ["Ann"]}}}`,
}

// The locations: a triangle with a triangular hole, whose box holds
// points outside it, and a circle of 5 km, whose box's corners are
// outside it; loc_gone is named but not there (deleted).
var shapes = map[string]geo.Shape{
	"loc_triangle": geo.Polygon{Outer: []geo.Point{pt(52, 13), pt(52, 14), pt(53, 13), pt(52, 13)},
		Holes: [][]geo.Point{{pt(52.2, 13.2), pt(52.2, 13.4), pt(52.4, 13.2), pt(52.2, 13.2)}}},
	"loc_circle": geo.Circle{Center: geo.Point{Lat: 48.85, Lng: 2.35}, Radius: 5000},
}

// What $in_location must hold, by name, whatever the two ways agree on.
var want = map[string][]string{
	`{"metadata.at": {"conditions": {"$in_location": ["loc_triangle"]}}}`:                                                                      {"In the triangle", "One of many in the triangle"},
	`{"metadata.at": {"conditions": {"$in_location": ["loc_circle", "loc_gone"]}}}`:                                                            {"In the circle", "In the circle, with an exponent"},
	`{"metadata.at": {"conditions": {"$in_location": ["loc_gone"]}}}`:                                                                          nil,
	`{"metadata.tags": {"conditions": {"$count_more": [1]}}}`:                                                                                  {"In the hole", "Triangle box only"},
	`{"metadata.tags": {"conditions": {"$count": [0]}}}`:                                                                                       {"In the triangle"},
	`{"events.purchase.count": {"conditions": {"$count_more": [2]}}}`:                                                                          {"Ann"},
	`{"events.purchase.count": {"conditions": {"$is": [2]}}}`:                                                                                  {"Bob"},
	`{"junction": "or", "events.visit.count": {"conditions": {"$count_more": [1]}}, "events.purchase.count": {"conditions": {"$count": [3]}}}`: {"Ann", "ann"},
}

// refined checks a prefilter's ids (sqlIDs) against Go's (goIDs) and
// answers them refined by Go's match.
func refined(t *testing.T, raw string, f *targeting.Filter[customers.Customer], all []customers.Customer, goIDs, sqlIDs []string, now time.Time) []string {
	t.Helper()
	// The SQL is a prefilter by bounding boxes: it keeps every
	// record Go holds, those in a box but outside its shape too,
	// and the refinement by Go's match leaves exactly Go's.
	for _, id := range goIDs {
		if !slices.Contains(sqlIDs, id) {
			t.Errorf("%s: the prefilter drops %v, which Go holds", raw, names(all, []string{id}))
		}
	}
	alone := !strings.Contains(raw, "junction") && !strings.Contains(raw, "tags") // $in_location only
	if alone && (strings.Contains(raw, "loc_triangle") && !slices.Contains(names(all, sqlIDs), "Triangle box only") ||
		strings.Contains(raw, "loc_circle") && !slices.Contains(names(all, sqlIDs), "Circle box only")) {
		t.Errorf("%s: the prefilter keeps %v, not the point in the box outside the shape", raw, names(all, sqlIDs))
	}
	if slices.Contains(names(all, sqlIDs), "Far away") {
		t.Errorf("%s: the prefilter keeps a point outside every box", raw)
	}
	sqlIDs = slices.DeleteFunc(sqlIDs, func(id string) bool {
		return !f.Match(all[slices.IndexFunc(all, func(c customers.Customer) bool { return c.ID == id })], now, targets)
	})
	return sqlIDs
}

// sqlMatches are the ids of the customers f's SQL selects.
func sqlMatches(ctx context.Context, t *testing.T, pool *db.Pool, raw string, f *targeting.Filter[customers.Customer], now time.Time) []string {
	t.Helper()
	args := []any{"proj_x", "", "\U0010FFFF"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	rows, err := pool.Query(ctx, customers.Matching(f.Where(arg, now, targets)), args...)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return ids
}

// targets are the customers' paths with the events' counts in SQL, as the
// segments' service makes them.
var targets = func() targeting.Schema[customers.Customer] {
	s := customers.Targets
	s.EventsSQL = events.Counts{}.CountSQL
	return s
}()

// eventCounts are the counts of events of Ann, Bob, ann and the nameless
// one (the customers after the empty first one): purchases and visits; the
// others sent none.
var eventCounts = []map[string]int{{"purchase": 3}, {"purchase": 2}, {"purchase": 1, "visit": 5}, {"visit": 1}}

// eventFilters are the filters of events.<name>.count.
var eventFilters = []string{
	`{"events.purchase.count": {"conditions": {"$count_more": [2]}}}`,
	`{"events.purchase.count": {"conditions": {"$count": [0]}}}`,
	`{"events.purchase.count": {"conditions": {"$count_less": [2]}}}`,
	`{"events.purchase.count": {"conditions": {"$more_than": [1]}}}`,
	`{"events.purchase.count": {"conditions": {"$less_than_equal": ["2"]}}}`,
	`{"events.purchase.count": {"conditions": {"$is": [2]}}}`,
	`{"events.purchase.count": {"conditions": {"$is_not": [0]}}}`,
	`{"events.purchase.count": {"conditions": {"$in": [1, 3]}}}`,
	`{"events.purchase.count": {"conditions": {"$not_in": [0, 3]}}}`,
	`{"events.never.count": {"conditions": {"$count": [0]}}}`,
	`{"junction": "or", "events.visit.count": {"conditions": {"$count_more": [1]}}, "events.purchase.count": {"conditions": {"$count": [3]}}}`,
	`{"events.visit.count": {"conditions": {"$more_than_equal": [1]}}, "events.purchase.count": {"conditions": {"$count_less": [3]}}}`,
}

// withEvents stores eventCounts for the first of ids (as the events
// package does, in its table) and answers all the customers of ids with
// the counts of the names eventFilters use loaded, as segments loads them.
func withEvents(ctx context.Context, t *testing.T, pool *db.Pool, ids []string) []customers.Customer {
	t.Helper()
	for i, counts := range eventCounts {
		for name, n := range counts {
			if _, err := pool.Exec(ctx, `INSERT INTO customer_event_counts (project_id, customer_id, event_name, count)
				VALUES ('proj_x', $1, $2, $3)`, ids[i+1], name, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := customers.Many(ctx, pool, "proj_x", ids)
	if err != nil || len(all) != len(ids) {
		t.Fatalf("%d customers, %v", len(all), err)
	}
	counts, err := events.Counts{}.Counts(ctx, pool, "proj_x", ids, []string{"purchase", "visit", "never"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		all[i].EventCounts = counts[all[i].ID]
	}
	return all
}

func pt(lat, lng float64) geo.Point { return geo.Point{Lat: lat, Lng: lng} }

func names(all []customers.Customer, ids []string) []string {
	var out []string
	for _, c := range all {
		if slices.Contains(ids, c.ID) {
			n := "<nil>"
			if c.Attrs.Name != nil {
				n = *c.Attrs.Name
			}
			out = append(out, n)
		}
	}
	return out
}
