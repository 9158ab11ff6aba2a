package segments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/regional/customers"
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
	all, err := customers.Many(ctx, pool, "proj_x", ids)
	if err != nil || len(all) != len(ids) {
		t.Fatalf("%d customers, %v", len(all), err)
	}
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
	for _, raw := range filters {
		f, err := targeting.Parse(json.RawMessage(raw), customers.Targets, "filter")
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var goIDs []string
		for _, c := range all {
			if f.Match(c, now, customers.Targets) {
				goIDs = append(goIDs, c.ID)
			}
		}
		args := []any{"proj_x", "", "\U0010FFFF"}
		arg := func(v any) string {
			args = append(args, v)
			return fmt.Sprintf("$%d", len(args))
		}
		rows, err := pool.Query(ctx, customers.Matching(f.Where(arg, now, customers.Targets)), args...)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		sqlIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		slices.Sort(goIDs)
		slices.Sort(sqlIDs)
		if !slices.Equal(goIDs, sqlIDs) {
			t.Errorf("%s: Go matches %d %v, SQL %d %v", raw, len(goIDs), names(all, goIDs), len(sqlIDs), names(all, sqlIDs))
		}
	}
}

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
