package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tallyhq/tally/internal/db"
)

// serverActivity describes what the database server is busy with besides
// the platform's own statements: autovacuum and other backends' work, and
// the outbox's live and dead rows. A section whose figure differs between a
// full run and a run of its own prints it, so the difference has a witness.
func serverActivity(ctx context.Context, pool *db.Pool) string {
	var b strings.Builder
	rows, err := pool.Query(ctx, `SELECT datname, backend_type, state, left(regexp_replace(query, '\s+', ' ', 'g'), 90),
			extract(epoch FROM now() - xact_start)::INT8, age(backend_xmin)::INT8
		FROM pg_stat_activity
		WHERE pid <> pg_backend_pid()`)
	if err == nil {
		ours := 0
		for rows.Next() {
			var dat, typ, state, query *string
			var age, xmin *int64
			if rows.Scan(&dat, &typ, &state, &query, &age, &xmin) != nil || typ == nil {
				continue
			}
			switch {
			case *typ == "client backend" && str(dat) == "tally" && val(age) < 2 && val(xmin) < 1000:
				if str(state) == "active" {
					ours++
				}
			case *typ == "client backend" && str(dat) == "tally":
				fmt.Fprintf(&b, "  old snapshot: %s %ds xmin age %d: %s\n", str(state), val(age), val(xmin), str(query))
			case strings.Contains(*typ, "autovacuum worker") || str(state) == "active":
				fmt.Fprintf(&b, "  %s %s %s %ds: %s\n", str(dat), *typ, str(state), val(age), str(query))
			}
		}
		rows.Close()
		fmt.Fprintf(&b, "  platform statements running: %d\n", ours)
	}
	var live, dead, vacuums, analyzes int64
	var lastAuto *time.Time
	err = pool.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, last_autovacuum
		FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&live, &dead, &vacuums, &analyzes, &lastAuto)
	if err == nil {
		fmt.Fprintf(&b, "  outbox: %d live, %d dead rows; %d autovacuums, %d autoanalyzes", live, dead, vacuums, analyzes)
		if lastAuto != nil {
			fmt.Fprintf(&b, " (last vacuum %s ago)", time.Since(*lastAuto).Round(time.Second))
		}
		b.WriteString("\n")
	}
	var load string
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.TrimSpace(string(l))
	}
	return fmt.Sprintf("server activity (load %s):\n%s", load, b.String())
}

// explainClaim shows the plan the outbox claim gets now, rolled back.
func explainClaim(ctx context.Context, pool *db.Pool) string {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err.Error()
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
		UPDATE outbox SET run_after = now() + 30000 * INTERVAL '1 millisecond', lease_owner = 'explain', attempts = attempts + 1
		WHERE (project_id, id) IN (
			SELECT project_id, id FROM outbox WHERE status = 'pending' AND run_after <= now()
			ORDER BY run_after LIMIT 64 FOR UPDATE SKIP LOCKED)`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if rows.Scan(&line) == nil {
			b.WriteString("  " + line + "\n")
		}
	}
	return "claim plan:\n" + b.String()
}

func str(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func val(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// explainFinish shows the plans a task's finish gets now: custom (what a
// connection's first five executions of the prepared statement use) and
// generic (what PostgreSQL may cache for it after that).
func explainFinish(ctx context.Context, pool *db.Pool) string {
	var b strings.Builder
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		func() {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return
			}
			defer tx.Rollback(ctx)
			var project, id, owner string
			var attempts int
			if err := tx.QueryRow(ctx, `SELECT project_id, id, coalesce(lease_owner, ''), attempts FROM outbox
				WHERE status = 'pending' ORDER BY run_after LIMIT 1`).Scan(&project, &id, &owner, &attempts); err != nil {
				b.WriteString("  " + err.Error() + "\n")
				return
			}
			_, _ = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode, pgx.QueryExecModeSimpleProtocol)
			_, _ = tx.Exec(ctx, `PREPARE diag_finish(text, text, text, int) AS UPDATE outbox SET status = 'done', finished_at = now(), last_error = NULL
				WHERE project_id = $1 AND id = $2 AND status = 'pending' AND lease_owner = $3 AND attempts = $4`, pgx.QueryExecModeSimpleProtocol)
			rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE diag_finish('%s', '%s', '%s', %d)", project, id, owner, attempts),
				pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				b.WriteString("  " + err.Error() + "\n")
				return
			}
			defer rows.Close()
			b.WriteString("  " + mode + ":\n")
			for rows.Next() {
				var line string
				if rows.Scan(&line) == nil {
					b.WriteString("    " + line + "\n")
				}
			}
		}()
	}
	return "finish plans:\n" + b.String()
}

// settle waits, at most two minutes, until the regional outbox holds no
// pending task (the notices of a million imported customers, say), then
// checkpoints the server: a section comparing two figures should not time
// the one against the work the sections before it left behind.
func settle(pool *db.Pool) {
	ctx := context.Background()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&n); err != nil || n == 0 {
			break
		}
	}
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		fmt.Fprintf(os.Stderr, "bench: checkpoint: %v\n", err)
	}
}
