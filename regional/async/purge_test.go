package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// The purge of finished tasks deletes in statements of at most its batch
// size until none older than the retention is left, and keeps the pending,
// the parked and the recently finished ones.
func TestThePurgeDeletesFinishedTasksInBoundedBatches(t *testing.T) {
	ctx := context.Background()
	p := open(t, database(t))
	const old, batch = 1030, 100
	// Finished two days ago (their leases ended a little later, some at the
	// same moment); finished an hour ago; parked and pending two days ago.
	if _, err := p.Exec(ctx, `INSERT INTO outbox (project_id, id, kind, payload, status, max_attempts, run_after, created_at, finished_at)
		SELECT 'prj_' || (i % 3), 'tsk_' || i, 'k', '{}', s, 5, f + INTERVAL '30 seconds', f - INTERVAL '1 second', CASE WHEN s = 'pending' THEN NULL ELSE f END
		FROM (SELECT i, CASE WHEN i <= $1 THEN 'done' WHEN i <= $1 + 10 THEN 'parked' WHEN i <= $1 + 20 THEN 'pending' ELSE 'done' END AS s,
			CASE WHEN i <= $1 + 20 THEN now() - INTERVAL '2 days' + (i / 4) * INTERVAL '1 second' ELSE now() - INTERVAL '1 hour' END AS f
			FROM generate_series(1, $1::INT8 + 30) AS i) AS t`, old); err != nil {
		t.Fatal(err)
	}
	got, err := async.PurgeDone(ctx, p, 24*time.Hour, batch)
	if err != nil {
		t.Fatal(err)
	}
	// 10 full batches and one of 30.
	if want := (db.Swept{Rows: old, Batches: old/batch + 1, Largest: batch}); got != want {
		t.Fatalf("purged %+v, want %+v", got, want)
	}
	if n := count(t, p, `SELECT count(*) FROM outbox WHERE status = 'done' AND finished_at < now() - INTERVAL '1 day'`); n != 0 {
		t.Errorf("%d old finished tasks left", n)
	}
	for status, want := range map[string]int{"done": 10, "parked": 10, "pending": 10} {
		if n := count(t, p, `SELECT count(*) FROM outbox WHERE status = '`+status+`'`); n != want {
			t.Errorf("%d %s tasks left, want %d", n, status, want)
		}
	}
}
