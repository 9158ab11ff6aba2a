package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// A pipe's Tx runs store functions' statements in the pipe's transaction,
// the first carrying the BEGIN: what they read and wrote commits with the
// batch fn returns, or rolls back with it.
func TestAPipesTxIsItsTransaction(t *testing.T) {
	pool := pipeTable(t)
	ctx := context.Background()
	run := func(fail bool) error {
		return db.InPipe(ctx, pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			tx := p.Tx()
			var n int
			if err := tx.QueryRow(ctx, `SELECT n FROM acct WHERE id = 1 FOR UPDATE`).Scan(&n); err != nil {
				return nil, err
			}
			if _, err := tx.Exec(ctx, `UPDATE acct SET n = n - 1 WHERE id = 1`); err != nil {
				return nil, err
			}
			var in bool
			if err := tx.QueryRow(ctx, `SELECT now() = statement_timestamp()`).Scan(&in); err != nil || in {
				return nil, errors.New("the statements ran outside a transaction")
			}
			if fail {
				return nil, errors.New("fn failed")
			}
			w := &pgx.Batch{}
			w.Queue(`UPDATE acct SET n = n + 1 WHERE id = 2`)
			return w, nil
		})
	}
	if err := run(false); err != nil {
		t.Fatal(err)
	}
	if err := run(true); err == nil {
		t.Fatal("fn's failure was not answered")
	}
	if a, b := balances(t, pool); a != 9 || b != 1 {
		t.Fatalf("balances %d, %d; want 9, 1 (the failed run rolled back)", a, b)
	}
	var missing int
	err := db.InPipe(ctx, pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		return nil, p.Tx().QueryRow(ctx, `SELECT n FROM acct WHERE id = 3`).Scan(&missing)
	})
	if !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a missing row through a pipe's Tx: %v, want ErrNotFound", err)
	}
}

// A change queued with QueueChange that changes no row fails in the
// database, so the COMMIT sent in its batch commits nothing of the
// transaction, and the batch answers the error it was given.
func TestQueueChangeStopsTheCommitOfItsBatch(t *testing.T) {
	pool := pipeTable(t)
	ctx := context.Background()
	errNone := errors.New("nothing to take")
	take := func(k int) error {
		return db.InPipe(ctx, pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			w := &pgx.Batch{}
			w.Queue(`UPDATE acct SET n = n + $1 WHERE id = 2`, k)
			db.QueueChange(w, errNone, `UPDATE acct SET n = n - $1 WHERE id = 1 AND n >= $1`, k)
			return w, nil
		})
	}
	if err := take(4); err != nil {
		t.Fatal(err)
	}
	if err := take(7); !errors.Is(err, errNone) {
		t.Fatalf("taking more than there is: %v, want errNone", err)
	}
	if a, b := balances(t, pool); a != 6 || b != 4 {
		t.Fatalf("balances %d, %d; want 6, 4 (the refused take committed nothing)", a, b)
	}
}
