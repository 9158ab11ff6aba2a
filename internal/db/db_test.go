package db_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func open(t *testing.T) *db.Pool { return dbtest.OpenPool(t, "main") }

func TestInTxRetriesConflictingSerializableTransactionsUntilBothCommit(t *testing.T) {
	pool := open(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO counter VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	// Both transactions read before either writes, so under SERIALIZABLE one
	// of them must fail (40001) at its write or commit; InTx retries it whole.
	var bothRead sync.WaitGroup
	bothRead.Add(2)
	var calls atomic.Int32
	increment := func() error {
		return db.InTx(ctx, pool, func(tx pgx.Tx) error {
			calls.Add(1)
			var n int
			if err := tx.QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
				return err
			}
			if calls.Load() <= 2 {
				bothRead.Done()
				bothRead.Wait()
			}
			_, err := tx.Exec(ctx, `UPDATE counter SET n = $1 WHERE id = 1`, n+1)
			return err
		})
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { errs <- increment() }()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("transaction failed: %v", err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("counter = %d, want 2 (a lost update)", n)
	}
	if c := calls.Load(); c < 3 {
		t.Fatalf("function ran %d times; the conflict should have forced a retry", c)
	}
}

func TestInTxReturnsNonRetryableErrorsAtOnce(t *testing.T) {
	pool := open(t)
	calls := 0
	boom := errors.New("boom")
	err := db.InTx(context.Background(), pool, func(tx pgx.Tx) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err=%v calls=%d", err, calls)
	}
}

func TestClassifyMapsNoRowsAndUniqueViolation(t *testing.T) {
	pool := open(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE u (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO u VALUES ('a'), ('a')`)
		return err
	})
	if !errors.Is(err, db.ErrConflict) {
		t.Fatalf("duplicate insert: %v, want ErrConflict", err)
	}
	err = db.InTx(ctx, pool, func(tx pgx.Tx) error {
		var k string
		return tx.QueryRow(ctx, `SELECT k FROM u WHERE k = 'zz'`).Scan(&k)
	})
	if !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("missing row: %v, want ErrNotFound", err)
	}
}

func TestStoppedDatabaseIsUnavailableQuickly(t *testing.T) {
	srv := dbtest.Private(t)
	pool, err := db.Open(context.Background(), srv.NewDatabase(t), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	err = db.InTx(context.Background(), pool, func(tx pgx.Tx) error { return nil })
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v to report the outage", d)
	}
}

func TestCockroachDBEngine(t *testing.T) {
	if dbtest.Engine() != "cockroachdb" {
		t.Skipf("the database tests ran on PostgreSQL; set %s=/path/to/cockroach to run them on CockroachDB through cockroach-go's testserver", dbtest.EnvCockroach)
	}
	pool := open(t)
	var v string
	if err := pool.QueryRow(context.Background(), `SELECT version()`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Log(v)
}

// ambiguousBeginner begins transactions whose COMMIT answers 40003, as
// CockroachDB does when it cannot tell whether the commit happened.
type ambiguousBeginner struct{ begun int }

type ambiguousTx struct{ pgx.Tx }

func (a *ambiguousBeginner) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	a.begun++
	return ambiguousTx{}, nil
}

func (ambiguousTx) Commit(context.Context) error {
	return &pgconn.PgError{Code: "40003", Message: "result is ambiguous"}
}

func (ambiguousTx) Rollback(context.Context) error { return pgx.ErrTxClosed }

// An ambiguous commit may have happened: it is not run again (a second
// run would add the points again), and it is ErrAmbiguous.
func TestAnAmbiguousCommitIsNotRetried(t *testing.T) {
	b := &ambiguousBeginner{}
	runs := 0
	err := db.InTx(context.Background(), b, func(pgx.Tx) error { runs++; return nil })
	if !errors.Is(err, db.ErrAmbiguous) || runs != 1 || b.begun != 1 {
		t.Fatalf("an ambiguous commit: %v after %d runs", err, runs)
	}
}

// A connection lost during COMMIT leaves the commit's outcome unknown: it
// may have happened (here it did). The transaction is not run again, so
// its effect is there once, and the caller gets ErrUnavailable (503).
func TestACommitWhoseAnswerIsLostIsNotRunAgain(t *testing.T) {
	url := dbtest.Shared(t, "main").NewDatabase(t)
	ctx := context.Background()
	direct, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Exec(ctx, `CREATE TABLE points (id INT8 PRIMARY KEY, n INT8 NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(ctx, `INSERT INTO points VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	cut := dbtest.NewCommitCutter(t, url)
	pool, err := db.Open(ctx, cut.URL, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cut.Arm()
	runs := 0
	err = db.InTx(ctx, pool, func(tx pgx.Tx) error {
		runs++
		_, err := tx.Exec(ctx, `UPDATE points SET n = n + 10 WHERE id = 1`)
		return err
	})
	if !errors.Is(err, db.ErrUnavailable) || runs != 1 {
		t.Fatalf("a commit whose answer was lost: %v after %d runs", err, runs)
	}
	var n int64
	if err := direct.QueryRow(ctx, `SELECT n FROM points WHERE id = 1`).Scan(&n); err != nil || n != 10 {
		t.Fatalf("points after the lost answer: %d (%v), want 10: the commit happened once", n, err)
	}
}

// A snapshot does not see what commits after its first read, on the
// database the pool found at CheckServer.
func TestASnapshotKeepsWhatItFirstSaw(t *testing.T) {
	ctx := context.Background()
	url := dbtest.Shared(t, "main").NewDatabase(t)
	pool, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.CheckServer(ctx, pool); err != nil {
		t.Fatal(err)
	}
	want := db.PostgreSQL
	if dbtest.Engine() == "cockroachdb" {
		want = db.CockroachDB
	}
	if d, err := pool.Dialect(ctx); d != want {
		t.Fatalf("dialect %v (%v) on %s", d, err, dbtest.Engine())
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE snap (id INT8 PRIMARY KEY); INSERT INTO snap VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.BeginSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	count := func(q db.Querier) (n int) {
		if err := q.QueryRow(ctx, `SELECT count(*) FROM snap`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(tx); n != 1 {
		t.Fatalf("the snapshot sees %d rows, want 1", n)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO snap VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if n := count(tx); n != 1 {
		t.Fatalf("the snapshot sees a row committed after its first read: %d", n)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO snap VALUES (3)`); err == nil {
		t.Fatal("a snapshot wrote")
	}
}

// make test's serializable pass sets the servers' default isolation
// through TALLY_PG_SETTINGS: the servers the test helper starts take it.
func TestTheServersTakeTheRunsSettings(t *testing.T) {
	want := "read committed"
	for _, kv := range strings.Fields(os.Getenv("TALLY_PG_SETTINGS")) {
		if v, ok := strings.CutPrefix(kv, "default_transaction_isolation="); ok {
			want = v
		}
	}
	if dbtest.Engine() != "postgres" {
		t.Skip("PostgreSQL settings")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.Shared(t, "main").NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, `SHOW default_transaction_isolation`).Scan(&got); err != nil || got != want {
		t.Fatalf("default_transaction_isolation %q (%v), want %q", got, err, want)
	}
}
