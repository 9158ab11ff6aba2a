package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// Whatever way store code reaches the database (pool, transaction, rows,
// batch, pipe), its errors come back classified: no service compares driver
// errors or SQLSTATEs.
func TestEveryPathReturnsClassifiedErrors(t *testing.T) {
	p := open(t)
	ctx := context.Background()
	if _, err := p.Exec(ctx, `CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL CONSTRAINT n_positive CHECK (n > 0))`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `INSERT INTO t VALUES (1, 1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	check := func(what string, err, kind error, constraint string) {
		t.Helper()
		if !errors.Is(err, kind) || db.Constraint(err) != constraint {
			t.Errorf("%s: %v (constraint %q), want %v on %q", what, err, db.Constraint(err), kind, constraint)
		}
	}
	check("pool row", p.QueryRow(ctx, `SELECT n FROM t WHERE id = 2`).Scan(&n), db.ErrNotFound, "")
	_, err := p.Exec(ctx, `INSERT INTO t VALUES (1, 1)`)
	check("pool exec", err, db.ErrConflict, "t_pkey")
	_, err = p.Exec(ctx, `INSERT INTO t VALUES (2, 0)`)
	check("pool check", err, db.ErrCheck, "n_positive")
	_, err = p.Exec(ctx, `SELECT $1::TEXT`, "a\x00b")
	check("pool NUL", err, db.ErrInvalidValue, "")
	rows, _ := p.Query(ctx, `SELECT 1 / (n - 1) FROM t`)
	_, err = pgx.CollectRows(rows, pgx.RowTo[int])
	check("rows division by zero", err, db.ErrInvalidValue, "")

	err = db.InTx(ctx, p, func(tx pgx.Tx) error {
		check("tx row", tx.QueryRow(ctx, `SELECT n FROM t WHERE id = 3`).Scan(&n), db.ErrNotFound, "")
		b := &pgx.Batch{}
		b.Queue(`UPDATE t SET n = 0 WHERE id = 1`)
		_, err := tx.SendBatch(ctx, b).Exec()
		return err
	})
	check("tx batch", err, db.ErrCheck, "n_positive")

	err = db.InPipe(ctx, p, pgx.ReadCommitted, func(ctx context.Context, pp *db.Pipe) (*pgx.Batch, error) {
		b := &pgx.Batch{}
		b.Queue(`SELECT n FROM t WHERE id = 4`)
		br := pp.Send(ctx, b)
		err := br.QueryRow().Scan(&n)
		_ = br.Close()
		return nil, err
	})
	check("pipe", err, db.ErrNotFound, "")

	down, err := db.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable", db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	check("unreachable", down.QueryRow(ctx, `SELECT 1`).Scan(&n), db.ErrUnavailable, "")
	check("unreachable tx", db.InTx(ctx, down, func(pgx.Tx) error { return nil }), db.ErrUnavailable, "")
}
