package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is the pipe as a pgx.Tx, for store functions that take one (the
// redemption engine's): a statement or batch sent first carries the BEGIN
// with it, as Send does, so the transaction costs no round trip of its
// own; what fn returns to InPipe is sent with the COMMIT. Commit, Rollback
// and savepoints are InPipe's and answer errPipeTx.
func (p *Pipe) Tx() pgx.Tx { return pipeTx{p} }

var errPipeTx = errors.New("db: a pipe's transaction is ended by InPipe")

type pipeTx struct{ p *Pipe }

// begin sends the BEGIN alone, for what cannot travel in a batch.
func (t pipeTx) begin(ctx context.Context) error {
	if t.p.begun {
		return nil
	}
	return t.p.Send(ctx, &pgx.Batch{}).Close()
}

func (t pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.p.begun {
		tag, err := t.p.conn.Exec(ctx, sql, args...)
		return tag, Classify(err)
	}
	var tag pgconn.CommandTag
	b := &pgx.Batch{}
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	return tag, t.p.Send(ctx, b).Close()
}

func (t pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.p.begun {
		return row{t.p.conn.QueryRow(ctx, sql, args...)}
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return firstRow{t.p.Send(ctx, b)}
}

// firstRow is the one row of a batch of one query, which its Scan closes.
type firstRow struct{ br pgx.BatchResults }

func (r firstRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return classifyRows(t.p.conn.Query(ctx, sql, args...))
}

func (t pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.p.Send(ctx, b)
}

func (t pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	n, err := t.p.conn.CopyFrom(ctx, table, cols, src)
	return n, Classify(err)
}

func (t pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	sd, err := t.p.conn.Conn().Prepare(ctx, name, sql)
	return sd, Classify(err)
}

func (t pipeTx) Conn() *pgx.Conn                       { return t.p.conn.Conn() }
func (t pipeTx) LargeObjects() pgx.LargeObjects        { return pgx.LargeObjects{} }
func (t pipeTx) Begin(context.Context) (pgx.Tx, error) { return nil, errPipeTx }
func (t pipeTx) Commit(context.Context) error          { return errPipeTx }
func (t pipeTx) Rollback(context.Context) error        { return errPipeTx }

// QueueChange queues a statement that changes rows (an UPDATE or DELETE,
// without RETURNING) onto b so that the database fails it, and with it the
// transaction, when it changes none: Close then answers none. A check read
// in Go from the rows a statement changed comes after the COMMIT sent in
// the same batch (InPipe) and cannot stop it; this one does. The statement
// becomes WITH changed AS (sql RETURNING 1) SELECT 1 / count(*) FROM
// changed: a division by zero (22012) in both dialects, the one failure the
// statement can raise that is not the database's own.
func QueueChange(b *pgx.Batch, none error, sql string, args ...any) {
	b.Queue(`WITH changed AS (`+sql+` RETURNING 1) SELECT 1 / count(*) FROM changed`, args...).QueryRow(func(r pgx.Row) error {
		var one any
		err := r.Scan(&one)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "22012" {
			return none
		}
		return err
	})
}
