package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Pipe is a transaction whose statements go to the database in batches:
// BEGIN travels with the first batch and COMMIT with the last, so a
// transaction that reads, decides in Go and then writes costs two round
// trips, not one per statement plus two. Statements of a batch run in the
// order queued, each seeing what the ones before it did (at READ COMMITTED,
// a row locked by one is read fresh by the next).
type Pipe struct {
	conn  *pgxpool.Conn
	iso   pgx.TxIsoLevel
	begun bool
}

// Send sends b inside the transaction; the first call also begins it. The
// results must be closed before the next Send, and before fn returns.
func (p *Pipe) Send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if p.begun {
		return batchResults{p.conn.SendBatch(ctx, b)}
	}
	p.begun = true
	nb := &pgx.Batch{}
	nb.Queue("BEGIN TRANSACTION ISOLATION LEVEL " + string(p.iso))
	for _, q := range bounds() {
		nb.Queue(q)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := p.conn.SendBatch(ctx, nb)
	for range 1 + len(bounds()) {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return pgx.FailedBatchResults(nb, Classify(err))
		}
	}
	return batchResults{br}
}

// InPipe runs fn as one transaction at isolation iso on a connection of
// pool. fn sends what it must read with p.Send and returns the batch of
// its writes (nil for none), which is sent with COMMIT. When fn fails, or a
// statement does, the transaction is rolled back. Retried whole as InTx is,
// so fn must have no effect outside the database.
func InPipe(ctx context.Context, pool *Pool, iso pgx.TxIsoLevel, fn func(ctx context.Context, p *Pipe) (*pgx.Batch, error)) error {
	ctx, span := tracer.Start(ctx, "db.InPipe")
	defer span.End()
	attempts, err := retry(ctx, func(ctx context.Context) error {
		leave, err := enter(ctx)
		if err != nil {
			return err
		}
		defer leave()
		conn, err := pool.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		p := &Pipe{conn: conn, iso: iso}
		last, err := fn(ctx, p)
		if err == nil {
			if last == nil {
				last = &pgx.Batch{}
			}
			last.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
				if ct.String() == "ROLLBACK" { // an earlier batch failed and fn went on
					return pgx.ErrTxCommitRollback
				}
				return nil
			})
			err = p.Send(ctx, last).Close()
		}
		if pc := conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
			if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
				// The connection is in an unknown state: drop it, not reuse it.
				_ = conn.Conn().Close(ctx)
			}
		}
		return err
	})
	span.SetAttributes(attribute.Int("db.tx.attempts", attempts))
	if err != nil && !errors.Is(err, ErrNotFound) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
