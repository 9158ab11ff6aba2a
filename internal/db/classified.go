package db

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is the services' connection pool: a pgxpool.Pool whose statements,
// rows, batches and transactions return classified errors (ErrNotFound,
// ErrConflict, ErrCheck, ErrInvalidValue, ErrUnavailable; see Classify).
// This is where store code touches the database, so a service never sees a
// driver error, and an outage is ErrUnavailable on every route alike.
type Pool struct {
	*pgxpool.Pool
	dialect atomic.Int32 // a Dialect, once read
}

// Exec runs a statement.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	leave, err := enter(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer leave()
	tag, err := p.Pool.Exec(ctx, sql, args...)
	return tag, Classify(err)
}

// Query runs a query; the rows hold the request's place in its bulkhead
// until they are closed.
func (p *Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	leave, err := enter(ctx)
	if err != nil {
		return nil, err
	}
	r, err := classifyRows(p.Pool.Query(ctx, sql, args...))
	if err != nil {
		leave()
		return nil, err
	}
	return leavingRows{r.(rows), leave}, nil
}

// QueryRow runs a query for one row; its Scan gives back the request's
// place in its bulkhead.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	leave, err := enter(ctx)
	if err != nil {
		return errRow{err}
	}
	return leavingRow{row{p.Pool.QueryRow(ctx, sql, args...)}, leave}
}

// SendBatch sends a batch in one round trip; closing its results gives
// back the request's place in its bulkhead.
func (p *Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	leave, err := enter(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return leavingBatch{batchResults{p.Pool.SendBatch(ctx, b)}, leave}
}

// Begin starts a transaction.
func (p *Pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx starts a transaction with options; it holds the request's place
// in its bulkhead until it commits or rolls back.
func (p *Pool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	leave, err := enter(ctx)
	if err != nil {
		return nil, err
	}
	t, err := p.Pool.BeginTx(ctx, opts)
	if err != nil {
		leave()
		return nil, Classify(err)
	}
	return leavingTx{tx{t}, leave}, nil
}

// The wrappers that give back a request's place in its bulkhead when the
// connection they hold goes back to the pool.
type (
	leavingRows struct {
		rows
		leave func()
	}
	leavingRow struct {
		row
		leave func()
	}
	leavingBatch struct {
		batchResults
		leave func()
	}
	leavingTx struct {
		tx
		leave func()
	}
	errRow struct{ err error }
)

func (r leavingRows) Close() { r.rows.Close(); r.leave() }

func (r leavingRows) Next() bool {
	if r.rows.Next() {
		return true
	}
	r.leave() // pgx closes rows read to the end
	return false
}

func (r leavingRow) Scan(dest ...any) error { defer r.leave(); return r.row.Scan(dest...) }

func (b leavingBatch) Close() error { defer b.leave(); return b.batchResults.Close() }

func (t leavingTx) Commit(ctx context.Context) error { defer t.leave(); return t.tx.Commit(ctx) }

func (t leavingTx) Rollback(ctx context.Context) error { defer t.leave(); return t.tx.Rollback(ctx) }

func (r errRow) Scan(...any) error { return r.err }

// tx is a transaction whose errors are classified.
type tx struct{ pgx.Tx }

func (t tx) Begin(ctx context.Context) (pgx.Tx, error) {
	n, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, Classify(err)
	}
	return tx{n}, nil
}

func (t tx) Commit(ctx context.Context) error { return Classify(t.Tx.Commit(ctx)) }

func (t tx) Rollback(ctx context.Context) error { return Classify(t.Tx.Rollback(ctx)) }

func (t tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, Classify(err)
}

func (t tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return classifyRows(t.Tx.Query(ctx, sql, args...))
}

func (t tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return row{t.Tx.QueryRow(ctx, sql, args...)}
}

func (t tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return batchResults{t.Tx.SendBatch(ctx, b)}
}

func (t tx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	n, err := t.Tx.CopyFrom(ctx, table, cols, src)
	return n, Classify(err)
}

func classifyRows(r pgx.Rows, err error) (pgx.Rows, error) {
	if err != nil {
		return nil, Classify(err)
	}
	return rows{r}, nil
}

type rows struct{ pgx.Rows }

func (r rows) Err() error { return Classify(r.Rows.Err()) }

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error { return Classify(r.Row.Scan(dest...)) }

type batchResults struct{ pgx.BatchResults }

func (b batchResults) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, Classify(err)
}

func (b batchResults) Query() (pgx.Rows, error) { return classifyRows(b.BatchResults.Query()) }

func (b batchResults) QueryRow() pgx.Row { return row{b.BatchResults.QueryRow()} }

func (b batchResults) Close() error { return Classify(b.BatchResults.Close()) }
