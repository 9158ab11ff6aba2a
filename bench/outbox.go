package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/pglocal"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/async"
)

// outboxResult is the claim's latency with no finished task in the outbox
// and with finished ones waiting for the purge (issue 34: the claim reads
// pending tasks only).
type outboxResult struct {
	finished          int64
	emptyP50, fullP50 []float64 // ms, round by round
	emptyP99, fullP99 []float64
	rounds, claims    int
}

// outboxRounds alternate: each round measures claims over an outbox without
// finished tasks, then over the same with them, so that the machine's drift
// weighs on both.
const outboxRounds = 5

// benchOutbox measures the workers' claim (async.Claim, 10 at a time, from
// a backlog of 10 due tasks a claim) on two databases of their own, alike
// but for a million finished tasks (finished an hour ago, not yet purged)
// in one of them; rounds alternate between the two.
func benchOutbox(server *pglocal.Server) (outboxResult, error) {
	ctx := context.Background()
	r := outboxResult{finished: 1_000_000, rounds: outboxRounds, claims: 300}
	open := func(name string, finished int64) (*db.Pool, error) {
		if err := server.CreateDatabase(ctx, name); err != nil {
			return nil, err
		}
		url := server.URL(name)
		if err := dbschema.Migrate(ctx, url, regional.Migrations, regional.MigrationsDir); err != nil {
			return nil, err
		}
		pool, err := db.Open(ctx, url, db.Options{MaxConns: 4})
		if err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (project_id, id, kind, payload, status, attempts, max_attempts, run_after, created_at, finished_at)
			SELECT 'proj_' || (i % 100), 'tsk_done_' || lpad(i::TEXT, 8, '0'), 'bench', '{"n": 1}', 'done', 1, 10,
				now() - INTERVAL '1 hour', now() - INTERVAL '1 hour', now() - INTERVAL '1 hour'
			FROM generate_series(1, $1::INT8) AS i`, finished); err != nil {
			pool.Close()
			return nil, err
		}
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
			pool.Close()
			return nil, err
		}
		return pool, nil
	}
	empty, err := open("outbox_bench_empty", 0)
	if err != nil {
		return r, err
	}
	defer empty.Close()
	full, err := open("outbox_bench_full", r.finished)
	if err != nil {
		return r, err
	}
	defer full.Close()
	phase := func(pool *db.Pool) (p50, p99 float64, err error) {
		exec := func(sql string, args ...any) error {
			_, err := pool.Exec(ctx, sql, args...)
			return err
		}
		var took []time.Duration
		for i := range r.claims {
			if err := exec(`INSERT INTO outbox (project_id, id, kind, payload, max_attempts, run_after, created_at)
				SELECT 'proj_' || j, 'tsk_' || $1::TEXT || '_' || j, 'bench', '{"n": 1}', 10, now() - INTERVAL '1 second', now()
				FROM generate_series(1, 10) AS j`, fmt.Sprintf("%d_%d", time.Now().UnixNano(), i)); err != nil {
				return 0, 0, err
			}
			t0 := time.Now()
			ts, err := async.Claim(ctx, pool, "bench", 10, time.Minute)
			took = append(took, time.Since(t0))
			if err != nil {
				return 0, 0, err
			}
			if len(ts) != 10 {
				return 0, 0, fmt.Errorf("outbox bench: claimed %d of 10 due tasks", len(ts))
			}
			// Finished, as a worker leaves them: out of the claim's index.
			if err := exec(`UPDATE outbox SET status = 'done', finished_at = now() WHERE lease_owner = 'bench' AND status = 'pending'`); err != nil {
				return 0, 0, err
			}
		}
		// What this phase finished goes, as the purge would: each phase
		// starts alike.
		if err := exec(`DELETE FROM outbox WHERE lease_owner = 'bench'`); err != nil {
			return 0, 0, err
		}
		slices.Sort(took)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		return ms(took[len(took)/2]), ms(took[len(took)*99/100]), nil
	}
	for range outboxRounds {
		p50, p99, err := phase(empty)
		if err != nil {
			return r, err
		}
		r.emptyP50, r.emptyP99 = append(r.emptyP50, p50), append(r.emptyP99, p99)
		if p50, p99, err = phase(full); err != nil {
			return r, err
		}
		r.fullP50, r.fullP99 = append(r.fullP50, p50), append(r.fullP99, p99)
	}
	return r, nil
}

func outboxReport(r outboxResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Outbox claim (issue 34)\n\n")
	fmt.Fprintf(&b, "The workers' claim (`async.Claim`, 10 tasks a claim, each claim after 10 tasks fell due, the claimed ones then "+
		"finished as a worker leaves them) on two databases of their own, one with no finished task in the outbox, the other with %d "+
		"finished an hour ago and not yet purged. %d claims a phase; %d rounds of both phases, alternating (`go run ./bench -only outbox`).\n\n",
		r.finished, r.claims, r.rounds)
	fmt.Fprintf(&b, "| round | claim p50 / p99, no finished task | claim p50 / p99, %d finished | p50 ratio |\n|---|---|---|---|\n", r.finished)
	for i := range r.emptyP50 {
		fmt.Fprintf(&b, "| %d | %.3f / %.3f ms | %.3f / %.3f ms | %.2f |\n", i+1, r.emptyP50[i], r.emptyP99[i], r.fullP50[i], r.fullP99[i],
			r.fullP50[i]/r.emptyP50[i])
	}
	ratio := pairedRatios(r.fullP50, r.emptyP50)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| claim p50 with %d finished tasks ÷ with none (median of the paired ratios) | ≤ 1.5 | %s | %s |\n",
		r.finished, ratio, verdict(ratio.median <= 1.5))
	return b.String()
}
