package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// sweepTable makes a table keyed (p, id) with expired rows (at < 1000) and
// live ones; many expired rows share a moment, so batches end in the middle
// of a run of equal times.
func sweepTable(t *testing.T, pool *db.Pool, expired, live int) {
	t.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE swept (p TEXT NOT NULL, id INT8 NOT NULL, at INT8 NOT NULL, PRIMARY KEY (p, id))`,
		`CREATE INDEX swept_by_at ON swept (at)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO swept (p, id, at)
		SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, i, (i / 7) % 1000 FROM generate_series(1, $1::INT8) AS i`, expired); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO swept (p, id, at)
		SELECT 'a', -i, 1000 + i FROM generate_series(1, $1::INT8) AS i`, live); err != nil {
		t.Fatal(err)
	}
}

func sweepOf(batch int) db.Sweep {
	return db.Sweep{Table: "swept", Where: "at < $1", Args: []any{int64(1000)},
		Order: []string{"at", "p", "id"}, Key: []string{"p", "id"}, Batch: batch}
}

func TestASweepDeletesInBatchesEachAtMostTheBatchSize(t *testing.T) {
	pool := open(t)
	ctx := context.Background()
	sweepTable(t, pool, 2500, 40)
	got, err := sweepOf(100).Run(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	// 25 full batches, then one that finds nothing and ends the sweep.
	if got.Rows != 2500 || got.Batches != 26 || got.Largest != 100 {
		t.Fatalf("swept %+v, want 2500 rows in 26 batches of at most 100", got)
	}
	var expired, live int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE at < 1000), count(*) FILTER (WHERE at >= 1000) FROM swept`).
		Scan(&expired, &live); err != nil {
		t.Fatal(err)
	}
	if expired != 0 || live != 40 {
		t.Fatalf("%d expired rows left, %d live rows (want 0 and 40)", expired, live)
	}
	// Nothing left: one statement, which deletes nothing.
	if got, err := sweepOf(100).Run(ctx, pool); err != nil || got != (db.Swept{Batches: 1}) {
		t.Fatalf("second sweep %+v, %v", got, err)
	}
}

// cancelling is a pool whose context ends after its first statement.
type cancelling struct {
	*db.Pool
	cancel     context.CancelFunc
	statements int
}

func (c *cancelling) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.statements++
	return cancelAfter{c.Pool.QueryRow(ctx, sql, args...), c.cancel}
}

type cancelAfter struct {
	pgx.Row
	cancel context.CancelFunc
}

func (r cancelAfter) Scan(dest ...any) error { defer r.cancel(); return r.Row.Scan(dest...) }

func TestASweepEndsWithItsContext(t *testing.T) {
	pool := open(t)
	sweepTable(t, pool, 500, 0)
	ctx, cancel := context.WithCancel(context.Background())
	q := &cancelling{Pool: pool, cancel: cancel}
	got, err := sweepOf(10).Run(ctx, q)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("sweep ended with %v (%+v), want context.Canceled", err, got)
	}
	if q.statements != 1 || got != (db.Swept{Rows: 10, Batches: 1, Largest: 10}) {
		t.Fatalf("swept %+v in %d statements after its context ended", got, q.statements)
	}
}
