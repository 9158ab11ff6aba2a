package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// serverActivity describes what the database server is busy with besides
// the platform's own statements: autovacuum and other backends' work, and
// the outbox's live and dead rows. A section whose figure differs between a
// full run and a run of its own prints it, so the difference has a witness.
func serverActivity(ctx context.Context, pool *pgxpool.Pool) string {
	var b strings.Builder
	rows, err := pool.Query(ctx, `SELECT datname, backend_type, state, left(regexp_replace(query, '\s+', ' ', 'g'), 90),
			extract(epoch FROM now() - xact_start)::INT8
		FROM pg_stat_activity
		WHERE pid <> pg_backend_pid()`)
	if err == nil {
		ours := 0
		for rows.Next() {
			var dat, typ, state, query *string
			var age *int64
			if rows.Scan(&dat, &typ, &state, &query, &age) != nil || typ == nil {
				continue
			}
			switch {
			case *typ == "client backend" && str(dat) == "tally":
				if str(state) == "active" {
					ours++
				}
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
func explainClaim(ctx context.Context, pool *pgxpool.Pool) string {
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
