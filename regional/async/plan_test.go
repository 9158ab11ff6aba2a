package async_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/regionaltest"
)

// A worker's updates of the tasks it holds find their row by its key, whatever
// the table's statistics say. Analyzed while nearly every row was done, the
// table looked as if 'pending' were rare, and PostgreSQL answered
// status = 'pending' from outbox_due instead of the key: every finish read
// the whole backlog, and deliveries from a 40,000-event backlog fell to a
// few hundred a second.
func TestGuardedUpdatesUseTheKeyWhenStatisticsAreStale(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := p.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	insert := func(status string, from, n int) {
		exec(`INSERT INTO outbox (project_id, id, kind, payload, status, attempts, max_attempts, run_after, lease_owner, created_at, finished_at)
			SELECT 'proj_test', 'tsk_' || lpad(i::TEXT, 8, '0'), 'test', '{}', $1, 1, 10, now(), 'w1', now(),
				CASE WHEN $1 = 'done' THEN now() END
			FROM generate_series($2::INT, $3::INT) AS i`, status, from, from+n-1)
	}
	// Statistics taken when nearly everything was done, then a backlog.
	insert("done", 0, 40000)
	exec(`ANALYZE outbox`)
	insert("pending", 40000, 40000)

	for sql, extra := range async.GuardedUpdates {
		args := append([]any{"proj_test", "tsk_00060000", "w1", 1}, extra...)
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, err := regionaltest.Explain(ctx, p, mode, sql, args)
			if err != nil {
				t.Fatalf("%s, %s: %v", firstLine(sql), mode, err)
			}
			if !strings.Contains(plan, "outbox_pkey") {
				t.Errorf("%s, %s: the update does not find its row by the key:\n%s\nplan:\n%s", firstLine(sql), mode, sql, plan)
			}
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// The claim and the parked list read their partial indexes, which hold no
// finished task: a poll reads pending tasks only, however many finished
// ones wait for the purge.
func TestTheQueuesReadsUseTheirPartialIndexes(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO outbox (project_id, id, kind, payload, status, attempts, max_attempts, run_after, created_at, finished_at)
			SELECT 'proj_test', 'tsk_' || lpad(i::TEXT, 8, '0'), 'test', '{}', 'done', 1, 10, now() - INTERVAL '1 hour', now(), now()
			FROM generate_series(1, 40000) AS i`,
		`INSERT INTO outbox (project_id, id, kind, payload, status, attempts, max_attempts, run_after, created_at)
			SELECT 'proj_test', 'tsk_' || s || i, 'test', '{}', s, 0, 10, now() - INTERVAL '1 minute', now()
			FROM generate_series(1, 20) AS i, (VALUES ('pending'), ('parked')) AS v(s)`,
		`ANALYZE outbox`,
	} {
		if _, err := p.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for sql, c := range map[string]struct {
		args  []any
		index string
	}{
		async.ClaimSQL:      {[]any{"w1", int64(30000), 10}, "outbox_pending"},
		async.ListParkedSQL: {[]any{"", "", 10}, "outbox_parked"},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, err := regionaltest.Explain(ctx, p, mode, sql, c.args)
			if err != nil {
				t.Fatalf("%s, %s: %v", firstLine(strings.TrimSpace(sql)), mode, err)
			}
			if !strings.Contains(plan, c.index) {
				t.Errorf("%s, %s: not from %s:\n%s", firstLine(strings.TrimSpace(sql)), mode, c.index, plan)
			}
		}
	}
}
