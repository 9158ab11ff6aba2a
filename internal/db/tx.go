package db

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/cockroach-go/v2/crdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Beginner is what InTx needs: a pool (or a single connection).
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Retry policy of InTx. The backoff doubles from RetryBase up to RetryCap,
// with full jitter, for at most MaxRetries retries, of which at most
// LockRetries after a deadlock or a lock wait past LockTimeout: a row that
// stays locked that long is busy, and the request answers 503 with
// Retry-After (ErrContended) rather than hold a connection in line.
var (
	MaxRetries  = 30
	LockRetries = 3
	RetryBase   = 2 * time.Millisecond
	RetryCap    = 500 * time.Millisecond
)

// The bounds of every transaction InTx and InPipe run, set with it
// (SET LOCAL, which PostgreSQL and CockroachDB both take): a wait for a row
// lock past LockTimeout, or a statement past StatementTimeout, ends the
// transaction, so one tenant's pile-up on a row never holds connections
// for long. Long reads that must outlast them (an export's snapshot) run
// outside InTx.
var (
	LockTimeout      = 2 * time.Second
	StatementTimeout = 20 * time.Second
)

// bounds are the SET LOCAL statements of LockTimeout and StatementTimeout.
func bounds() []string {
	return []string{
		fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", LockTimeout.Milliseconds()),
		fmt.Sprintf("SET LOCAL statement_timeout = '%dms'", StatementTimeout.Milliseconds()),
	}
}

// beginSQL begins a transaction at iso with its bounds, in one round trip:
// pgx sends a statement without arguments by the simple protocol, which
// takes several.
func beginSQL(iso pgx.TxIsoLevel) string {
	return "BEGIN ISOLATION LEVEL " + string(iso) + "; " + strings.Join(bounds(), "; ")
}

var tracer = otel.Tracer("github.com/tallyhq/tally/internal/db")

// Retries counts transactions run again because the database asked for it
// (exposed as a metric by the services); Deadlocks and LockTimeouts count
// the attempts that ended in a deadlock (40P01) or a lock wait past
// LockTimeout (55P03).
var Retries, Deadlocks, LockTimeouts atomic.Int64

// InTx runs fn in a serializable transaction and retries the whole
// transaction (begin, statements, commit) when the database asks for it:
// serialization failures (40001), deadlocks (40P01) and lock timeouts
// (55P03), including those raised at COMMIT. fn must have no effect
// outside the database (write side effects to the outbox instead): it may
// run more than once. An ambiguous result (CockroachDB's 40003, or the
// connection lost during COMMIT) is never retried: the commit may have
// happened, and a second run would apply its writes twice (points added
// again). It is ErrAmbiguous, or ErrUnavailable for a lost connection:
// 503, and the client reads before it sends the request again.
//
// The loop is cockroach-go's crdb.ExecuteCtx; it retries only what it
// recognises as 40001, so the other retryable codes are reported to it as such,
// and the jittered backoff it lacks happens here between attempts.
func InTx(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	return inTx(ctx, db, pgx.Serializable, fn)
}

// InTxReadCommitted is InTx at READ COMMITTED, for bookkeeping made only of
// inserts and compare-and-set updates (UPDATE … WHERE the row is still as
// read), and for writes that lock every row they change (SELECT … FOR
// UPDATE) before reading it, in one order (the points ledger, accruals,
// orders): both are correct without a serializable snapshot. PostgreSQL's
// serializable checks lock index pages, not rows, so busy bookkeeping on
// neighbouring rows (the outbox) fails them over and over for nothing.
// CockroachDB runs it at its own isolation, serializable unless read
// committed is enabled there.
func InTxReadCommitted(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	return inTx(ctx, db, pgx.ReadCommitted, fn)
}

func inTx(ctx context.Context, db Beginner, iso pgx.TxIsoLevel, fn func(tx pgx.Tx) error) error {
	ctx, span := tracer.Start(ctx, "db.InTx")
	defer span.End()
	attempts, err := retry(ctx, func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: iso, BeginQuery: beginSQL(iso)}, fn)
	})
	span.SetAttributes(attribute.Int("db.tx.attempts", attempts))
	if err != nil && !errors.Is(err, ErrNotFound) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// Statement runs fn, which issues a single statement on the pool (an implicit
// transaction), with InTx's retry rules. It is for statements that are
// correct on their own and must not take part in serializable conflict
// detection, such as a queue claim: its row locks (FOR UPDATE SKIP LOCKED)
// already keep two claimers apart, and under SERIALIZABLE on PostgreSQL its
// predicate read would conflict with every worker finishing a task.
func Statement(ctx context.Context, fn func(ctx context.Context) error) error {
	_, err := retry(ctx, fn)
	return err
}

// retry is the one retry loop: cockroach-go's crdb.ExecuteCtx, told that
// 40P01 and 55P03 are retryable too (40003 is not: see InTx), with a jittered backoff between
// attempts (no connection is held while it waits: each attempt takes its
// own). A deadlock or a lock timeout is tried again at most LockRetries
// times, then answered as ErrContended.
func retry(ctx context.Context, fn func(ctx context.Context) error) (int, error) {
	attempt, lockFails := 0, 0
	err := crdb.ExecuteCtx(crdb.WithMaxRetries(ctx, MaxRetries), func(ctx context.Context, _ ...any) error {
		if attempt > 0 {
			Retries.Add(1)
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return err
			}
		}
		attempt++
		err := fn(ctx)
		if isLockFailure(err) {
			if lockFails++; lockFails > LockRetries {
				return err
			}
		}
		if isRetryable(err) {
			return retryable{err}
		}
		return err
	})
	var r retryable
	if errors.As(err, &r) {
		// Out of retries: report the database's own error, not the wrapper.
		err = r.cause
	}
	return attempt, Classify(err)
}

func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03":
			return true
		}
	}
	return false
}

// isLockFailure says err is a deadlock or a lock wait past lock_timeout,
// and counts it.
func isLockFailure(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40P01":
		Deadlocks.Add(1)
		return true
	case "55P03":
		LockTimeouts.Add(1)
		return true
	}
	return false
}

// retryable tells crdb.ExecuteCtx to go again whatever the original code.
type retryable struct{ cause error }

func (r retryable) Error() string    { return r.cause.Error() }
func (r retryable) Unwrap() error    { return r.cause }
func (r retryable) SQLState() string { return "40001" }

func backoff(attempt int) time.Duration {
	d := RetryBase << min(attempt, 16)
	if d > RetryCap || d <= 0 {
		d = RetryCap
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ForUpdate is the locking clause of a read that is followed by a write to
// the same row in its transaction: " FOR UPDATE" when lock is set, else "".
func ForUpdate(lock bool) string {
	if lock {
		return " FOR UPDATE"
	}
	return ""
}

// QueueEach queues sql onto b and, when b's results are read, hands each
// row scan reads to each: how a package reads its rows onto another's batch.
func QueueEach[T any](b *pgx.Batch, scan func(pgx.Row) (T, error), each func(T), sql string, args ...any) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			each(v)
		}
		return rows.Err()
	})
}

// Collect reads every row a query returned with scan; it takes the query's
// results as they come: db.Collect(scanThing)(q.Query(ctx, sql, args...)).
func Collect[T any](scan func(pgx.Row) (T, error)) func(pgx.Rows, error) ([]T, error) {
	return func(rows pgx.Rows, err error) ([]T, error) {
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	}
}

// Map reads the rows of a query of two text columns into a map from the
// first to the second: db.Map(q.Query(ctx, sql, args...)).
func Map(rows pgx.Rows, err error) (map[string]string, error) {
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var k, v string
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil })
	return out, err
}
