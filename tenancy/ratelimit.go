package tenancy

import (
	"context"
	"time"

	"github.com/tallyhq/tally/internal/db"
)

// LeaseQuota takes up to want requests of a project's window (of window
// length, starting at start) whose limit is limit, for one router replica
// to hand out locally: the window's used count never passes the limit, so
// leases never overshoot it. It returns what was granted (0 when the
// window is spent) and the window's used count after the lease.
func LeaseQuota(ctx context.Context, q db.Querier, projectID string, window time.Duration, start time.Time,
	want, limit int64) (granted, used int64, err error) {
	err = q.QueryRow(ctx, `INSERT INTO rate_windows (project_id, window_seconds, window_start, used, last_grant)
		VALUES ($1, $2, $3, LEAST($4::INT8, $5::INT8), LEAST($4::INT8, $5::INT8))
		ON CONFLICT (project_id, window_seconds, window_start) DO UPDATE
		SET used = rate_windows.used + LEAST($4::INT8, GREATEST($5::INT8 - rate_windows.used, 0)),
		    last_grant = LEAST($4::INT8, GREATEST($5::INT8 - rate_windows.used, 0))
		RETURNING last_grant, used`, projectID, int64(window/time.Second), start, want, limit).Scan(&granted, &used)
	return granted, used, err
}

// DropRateWindows deletes the windows that started before cutoff, at most
// batch (db.SweepBatch when 0) in each statement (db.Sweep); run it on a
// pool.
func DropRateWindows(ctx context.Context, q db.Querier, cutoff time.Time, batch int) (db.Swept, error) {
	return db.Sweep{Table: "rate_windows", Where: `window_start < $1`, Args: []any{cutoff},
		Order: []string{"window_start", "project_id", "window_seconds"},
		Key:   []string{"project_id", "window_seconds", "window_start"}, Batch: batch}.Run(ctx, q)
}
