package tenancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// The directory's sweeps delete in statements of at most the batch size
// until nothing expired is left, and leave what is live.
func TestTheDirectorySweepsDeleteInBoundedBatches(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	now := time.Now().UTC().Truncate(time.Second)
	const expired, live, batch = 530, 20, 50
	seed := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, expired, live, now); err != nil {
			t.Fatal(err)
		}
	}
	// Expired rows share moments in runs of three, so batches end inside
	// runs of equal times.
	seed(`INSERT INTO directory_changes (id, kind, key, changed_at)
		SELECT 'chg_' || i, 'key', 'k' || i, CASE WHEN i <= $1 THEN $3::TIMESTAMPTZ - INTERVAL '2 hours' - (i / 3) * INTERVAL '1 second'
			ELSE $3::TIMESTAMPTZ - INTERVAL '1 minute' END
		FROM generate_series(1, $1::INT8 + $2::INT8) AS i`)
	seed(`INSERT INTO rate_windows (project_id, window_seconds, window_start, used, last_grant)
		SELECT 'prj_' || (i / 2), CASE WHEN i % 2 = 0 THEN 60 ELSE 3600 END,
			CASE WHEN i <= $1 THEN $3::TIMESTAMPTZ - INTERVAL '3 hours' - (i / 12) * INTERVAL '1 minute' ELSE $3::TIMESTAMPTZ - (i - $1) * INTERVAL '1 minute' END, 1, 1
		FROM generate_series(1, $1::INT8 + $2::INT8) AS i`)
	seed(`INSERT INTO oauth_tokens (token_hash, project_id, app_id, scopes, created_at, expires_at)
		SELECT 'h' || i, 'prj_' || (i % 4), 'app', 'api', $3::TIMESTAMPTZ - INTERVAL '3 days',
			CASE WHEN i <= $1 THEN $3::TIMESTAMPTZ - INTERVAL '2 days' + (i / 3) * INTERVAL '1 second' ELSE $3::TIMESTAMPTZ + INTERVAL '1 hour' END
		FROM generate_series(1, $1::INT8 + $2::INT8) AS i`)

	sweeps := map[string]func() (db.Swept, error){
		"directory_changes": func() (db.Swept, error) { return tenancy.PruneChanges(ctx, pool, time.Hour, batch) },
		"rate_windows":      func() (db.Swept, error) { return tenancy.DropRateWindows(ctx, pool, now.Add(-2*time.Hour), batch) },
		"oauth_tokens":      func() (db.Swept, error) { return tenancy.DropExpiredTokens(ctx, pool, now.Add(-24*time.Hour), batch) },
	}
	for table, sweep := range sweeps {
		got, err := sweep()
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		// 10 full batches and one of 30.
		if want := (db.Swept{Rows: expired, Batches: expired/batch + 1, Largest: batch}); got != want {
			t.Errorf("%s: swept %+v, want %+v", table, got, want)
		}
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != live {
			t.Errorf("%s: %d rows left, want the %d live ones", table, left, live)
		}
	}
}
