package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/db"
)

// dbWaits watches the database server while a phase runs: what its busy
// backends wait on (pg_stat_activity sampled every 10 ms), and how many
// commits and WAL flushes the phase cost. It says where a latency figure
// that follows the database's speed goes: to fsync (IO:WALSync,
// LWLock:WALWrite), to row locks (Lock:transactionid, Lock:tuple), or to
// the backends' own CPU (no wait).
type dbWaits struct {
	pool             *db.Pool
	stop             chan struct{}
	done             chan struct{}
	samples          int
	busy             map[string]int
	commits0, syncs0 int64
	commits, syncs   int64
	secs             float64
}

func watchDB(pool *db.Pool) *dbWaits {
	w := &dbWaits{pool: pool, stop: make(chan struct{}), done: make(chan struct{}), busy: map[string]int{}}
	w.commits0, w.syncs0 = w.counters()
	start := time.Now()
	go func() {
		defer close(w.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				w.secs = time.Since(start).Seconds()
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

// counters reads the server's commits (every database) and WAL flushes.
func (w *dbWaits) counters() (commits, syncs int64) {
	ctx := context.Background()
	_ = w.pool.QueryRow(ctx, `SELECT sum(xact_commit)::INT8 FROM pg_stat_database`).Scan(&commits)
	_ = w.pool.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&syncs)
	return commits, syncs
}

func (w *dbWaits) sample() {
	rows, err := w.pool.Query(context.Background(), `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),
			CASE WHEN wait_event_type = 'Lock' THEN ' (' || left(regexp_replace(query, '\s+', ' ', 'g'), 50) || ')' ELSE '' END
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()`)
	if err != nil {
		return
	}
	defer rows.Close()
	w.samples++
	for rows.Next() {
		var ev, q string
		if rows.Scan(&ev, &q) == nil {
			w.busy[ev+q]++
		}
	}
}

// end stops the watch and reads the counters again.
func (w *dbWaits) end() {
	close(w.stop)
	<-w.done
	c, s := w.counters()
	// Each sample was a commit of its own, which flushes nothing.
	w.commits, w.syncs = c-w.commits0-int64(w.samples), s-w.syncs0
}

// summary is one line: commits and WAL flushes per unit of work, and the
// busy backends' mean count with the share of each wait.
func (w *dbWaits) summary(units float64, unit string) string {
	if w.samples == 0 || units <= 0 {
		return "no samples"
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	total := 0
	for k, n := range w.busy {
		all = append(all, kv{k, n})
		total += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var parts []string
	for i, e := range all {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f %%", e.k, 100*float64(e.n)/float64(total)))
	}
	return fmt.Sprintf("%.2f commits and %.2f WAL flushes a %s (%.0f flushes/s); %.1f statements running on average: %s",
		float64(w.commits)/units, float64(w.syncs)/units, unit, float64(w.syncs)/w.secs,
		float64(total)/float64(w.samples), strings.Join(parts, ", "))
}
