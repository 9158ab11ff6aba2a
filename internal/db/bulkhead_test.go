package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// A tenant holding its whole share waits, then gets ErrOverShare, while
// another tenant is served at once; a request's own uses of the database
// (a transaction and a statement beside it, rows being read) count once,
// so a request never waits on itself; places come back when statements,
// rows, batches and transactions end.
func TestTheBulkheadKeepsATenantToItsShare(t *testing.T) {
	pool := open(t)
	b := db.NewBulkhead(300 * time.Millisecond)
	bg := context.Background()
	a1, a2, a3 := b.For(bg, "proj_a", 2), b.For(bg, "proj_a", 2), b.For(bg, "proj_a", 2)
	tx1, err := pool.Begin(a1)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(a2, `SELECT generate_series(1, 3)`)
	if err != nil {
		t.Fatal(err)
	}
	// proj_a holds its two places: a third request waits, then is refused.
	t0 := time.Now()
	_, err = pool.Exec(a3, `SELECT 1`)
	if !errors.Is(err, db.ErrOverShare) || time.Since(t0) < 250*time.Millisecond {
		t.Fatalf("over the share: %v after %v", err, time.Since(t0))
	}
	// Another tenant is served at once.
	t0 = time.Now()
	if _, err := pool.Exec(b.For(bg, "proj_b", 2), `SELECT 1`); err != nil || time.Since(t0) > 200*time.Millisecond {
		t.Fatalf("another tenant: %v after %v", err, time.Since(t0))
	}
	// The first request's own statement beside its transaction takes no
	// second place.
	if _, err := pool.Exec(a1, `SELECT 1`); err != nil {
		t.Fatalf("a request's second use: %v", err)
	}
	// Rows read to the end give their place back.
	for rows.Next() {
	}
	if err := pool.QueryRow(a3, `SELECT 1`).Scan(new(int)); err != nil {
		t.Fatalf("after the rows ended: %v", err)
	}
	if err := tx1.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	// With both places back, a transaction and a batch each take one.
	if err := db.InTx(a1, pool, func(tx pgx.Tx) error {
		return pool.SendBatch(a2, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: "SELECT 1"}}}).Close()
	}); err != nil {
		t.Fatalf("a transaction and a batch: %v", err)
	}
	// A request whose client went away while it waited is not refused as
	// over its share: it is canceled.
	hold, err := pool.Begin(a1)
	if err != nil {
		t.Fatal(err)
	}
	hold2, err := pool.Begin(a2)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithTimeout(b.For(bg, "proj_a", 2), 50*time.Millisecond)
	defer cancel()
	if _, err := pool.Exec(gone, `SELECT 1`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request canceled while waiting: %v", err)
	}
	_ = hold.Rollback(bg)
	_ = hold2.Rollback(bg)
}

// A row held locked past LockTimeout ends the waiting transaction, which
// is tried LockRetries more times and then answered ErrContended: the
// wait is bounded, whoever holds the row.
func TestALockWaitIsBounded(t *testing.T) {
	pool := open(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE hot (id INT8 PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hot VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	defer func(lt time.Duration, r int) { db.LockTimeout, db.LockRetries = lt, r }(db.LockTimeout, db.LockRetries)
	db.LockTimeout, db.LockRetries = 100*time.Millisecond, 2
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT id FROM hot WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	before := db.LockTimeouts.Load()
	t0 := time.Now()
	attempts := 0
	err = db.InTx(ctx, pool, func(tx pgx.Tx) error {
		attempts++
		_, err := tx.Exec(ctx, `UPDATE hot SET id = id WHERE id = 1`)
		return err
	})
	if !errors.Is(err, db.ErrContended) || attempts != 3 || db.LockTimeouts.Load()-before != 3 {
		t.Fatalf("a row locked throughout: %v after %d attempts", err, attempts)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("the bounded wait took %v", d)
	}
}
