package usage_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/regionaltest"
	"github.com/tallyhq/tally/regional/usage"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// call passes one application API request of proj_1 through c.
func call(t *testing.T, c *usage.Counter) {
	t.Helper()
	e := echo.New()
	r := httptest.NewRequest("GET", "/v1/customers", nil)
	r = r.WithContext(identity.With(r.Context(), identity.Identity{ProjectID: "proj_1"}))
	if err := c.Middleware(func(echo.Context) error { return nil })(e.NewContext(r, httptest.NewRecorder())); err != nil {
		t.Fatal(err)
	}
}

// A flush that finds nothing to add still returns only once the flush
// before it, which took the counts and is writing them, has committed: the
// usage endpoint flushes before it reads, and read nothing when the
// ticker's flush was mid-write.
func TestAFlushWaitsForTheFlushInProgress(t *testing.T) {
	ctx := context.Background()
	url := regionaltest.Database(t)
	pool := regionaltest.Open(t, url)
	c := usage.NewCounter(pool, slog.Default())
	calls := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT calls FROM api_usage WHERE project_id = 'proj_1'`).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	call(t, c)
	c.Flush(ctx)

	// Hold the day's row, so that the next flush stops mid-write.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT calls FROM api_usage WHERE project_id = 'proj_1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	call(t, c)
	first := make(chan struct{})
	go func() { c.Flush(ctx); close(first) }()
	for waiting, deadline := 0, time.Now().Add(10*time.Second); waiting == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the flush never waited on the held row")
		}
		time.Sleep(5 * time.Millisecond)
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(chan int64)
	go func() { c.Flush(ctx); seen <- calls() }()
	time.Sleep(200 * time.Millisecond)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-seen; n != 2 {
		t.Fatalf("after a flush, the day's calls read %d, want 2", n)
	}
	<-first
}

// A flush whose COMMIT's answer is lost (it committed) is not added again
// by the next flush: the flush's id, chosen before its first attempt, is
// in the database, so its counts are dropped rather than kept for later.
func TestAFlushWhoseCommitAnswerIsLostCountsOnce(t *testing.T) {
	ctx := context.Background()
	url := regionaltest.Database(t)
	cut := dbtest.NewCommitCutter(t, url)
	pool := regionaltest.Open(t, cut.URL)
	c := usage.NewCounter(pool, slog.Default())
	for range 3 {
		call(t, c)
	}
	cut.Arm()
	c.Flush(ctx) // committed, but its answer never came
	call(t, c)
	c.Flush(ctx)
	c.Flush(ctx)
	var n int64
	if err := pool.QueryRow(ctx, `SELECT calls FROM api_usage WHERE project_id = 'proj_1'`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("calls %d (%v), want 4: the flush whose answer was lost counted %s", n, err, map[bool]string{true: "twice", false: "wrong"}[n == 7])
	}
}

// A flush that failed before it committed has its counts added by a
// later flush.
func TestAFailedFlushIsAddedLater(t *testing.T) {
	ctx := context.Background()
	url := regionaltest.Database(t)
	pool := regionaltest.Open(t, url)
	c := usage.NewCounter(pool, slog.Default())
	call(t, c)
	call(t, c)
	// The day's row is locked past the lock timeout: the flush fails, rolled back.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `INSERT INTO api_usage (project_id, day, calls) VALUES ('proj_1', $1, 0)`, time.Now().UTC().Format("2006-01-02")); err != nil {
		t.Fatal(err)
	}
	c.Flush(ctx)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c.Flush(ctx)
	var n int64
	if err := pool.QueryRow(ctx, `SELECT calls FROM api_usage WHERE project_id = 'proj_1'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("calls %d (%v), want 2", n, err)
	}
}
