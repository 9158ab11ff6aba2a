package db_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

func pipeTable(t *testing.T) *db.Pool {
	t.Helper()
	pool := open(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE acct (id INT PRIMARY KEY, n INT NOT NULL CHECK (n >= 0));
		INSERT INTO acct VALUES (1, 10), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func balances(t *testing.T, pool *db.Pool) (a, b int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT n FROM acct WHERE id = 1), (SELECT n FROM acct WHERE id = 2)`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// move reads account 1 under its lock, then moves k from it to account 2.
func move(pool *db.Pool, k int, after func()) error {
	return db.InPipe(context.Background(), pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		b := &pgx.Batch{}
		var n int
		b.Queue(`SELECT n FROM acct WHERE id = 1 FOR UPDATE`).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
		if err := p.Send(ctx, b).Close(); err != nil {
			return nil, err
		}
		if after != nil {
			after()
		}
		if n < k {
			return nil, errors.New("not enough")
		}
		w := &pgx.Batch{}
		w.Queue(`UPDATE acct SET n = $1 WHERE id = 1`, n-k)
		w.Queue(`UPDATE acct SET n = n + $1 WHERE id = 2`, k)
		return w, nil
	})
}

func TestInPipeCommitsReadsAndWritesAsOneTransaction(t *testing.T) {
	pool := pipeTable(t)
	if err := move(pool, 3, nil); err != nil {
		t.Fatal(err)
	}
	if a, b := balances(t, pool); a != 7 || b != 3 {
		t.Fatalf("balances %d, %d; want 7, 3", a, b)
	}
	// Concurrent moves serialize on the row lock taken by the first batch:
	// none is lost, and the seven left cover exactly seven moves.
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := move(pool, 1, nil); err != nil {
				refused.Add(1)
				return
			}
			ok.Add(1)
		}()
	}
	wg.Wait()
	if a, b := balances(t, pool); a != 0 || b != 10 || ok.Load() != 7 || refused.Load() != 3 {
		t.Fatalf("balances %d, %d after %d moves and %d refusals; want 0, 10, 7, 3", a, b, ok.Load(), refused.Load())
	}
}

func TestInPipeRollsBackWhenFnOrAStatementFails(t *testing.T) {
	pool := pipeTable(t)
	ctx := context.Background()
	// fn fails after its read: nothing it would have written is, and the
	// connection goes back to the pool outside any transaction.
	if err := move(pool, 11, nil); err == nil {
		t.Fatal("a move of more than the balance succeeded")
	}
	// A statement of the last batch fails (the CHECK): the statements queued
	// before it in the same batch are undone too.
	err := db.InPipe(ctx, pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		w := &pgx.Batch{}
		w.Queue(`UPDATE acct SET n = n + 5 WHERE id = 2`)
		w.Queue(`UPDATE acct SET n = n - 50 WHERE id = 1`)
		return w, nil
	})
	if err == nil {
		t.Fatal("a batch breaking a CHECK committed")
	}
	if a, b := balances(t, pool); a != 10 || b != 0 {
		t.Fatalf("balances %d, %d after failures; want 10, 0", a, b)
	}
	// Every connection is reusable: each runs a fresh transaction.
	for i := 0; i < 2*int(pool.Config().MaxConns); i++ {
		if err := move(pool, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Fatalf("%d connections still held", st.AcquiredConns())
	}
}

func TestInPipeRetriesSerializationFailures(t *testing.T) {
	pool := pipeTable(t)
	ctx := context.Background()
	// Two serializable pipes read the same row before either writes; one
	// must fail with 40001 and is run again whole.
	var bothRead sync.WaitGroup
	bothRead.Add(2)
	var calls atomic.Int32
	bump := func() error {
		return db.InPipe(ctx, pool, pgx.Serializable, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			calls.Add(1)
			b := &pgx.Batch{}
			var n int
			b.Queue(`SELECT n FROM acct WHERE id = 2`).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
			if err := p.Send(ctx, b).Close(); err != nil {
				return nil, err
			}
			if calls.Load() <= 2 {
				bothRead.Done()
				bothRead.Wait()
			}
			w := &pgx.Batch{}
			w.Queue(`UPDATE acct SET n = $1 WHERE id = 2`, n+1)
			return w, nil
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = bump() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, b := balances(t, pool); b != 2 || calls.Load() < 3 {
		t.Fatalf("n = %d after %d runs; want 2 after at least 3", b, calls.Load())
	}
}
