package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Dialect is the database a pool talks to: the SQL is the same on both,
// the few things each does its own way are chosen by it.
type Dialect int32

const (
	DialectUnknown Dialect = iota
	PostgreSQL
	CockroachDB
)

func (d Dialect) String() string {
	switch d {
	case PostgreSQL:
		return "PostgreSQL"
	case CockroachDB:
		return "CockroachDB"
	}
	return "unknown"
}

// dialectOf reads a server's version() string.
func dialectOf(version string) Dialect {
	if strings.Contains(version, "CockroachDB") {
		return CockroachDB
	}
	return PostgreSQL
}

// Dialect is the pool's database, read once from the server (at start, by
// CheckServer, or at the first call) and kept.
func (p *Pool) Dialect(ctx context.Context) (Dialect, error) {
	if d := Dialect(p.dialect.Load()); d != DialectUnknown {
		return d, nil
	}
	var version string
	if err := p.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return DialectUnknown, err
	}
	d := dialectOf(version)
	p.dialect.Store(int32(d))
	return d, nil
}

// snapshotOptions begins a read-only transaction that sees one snapshot
// for as long as it runs. On PostgreSQL: REPEATABLE READ, which holds the
// snapshot of its first statement. On CockroachDB a long read at the
// present time would run SERIALIZABLE, be pushed by every write it
// overlaps and fail with a retry error after minutes of work; a historical
// read (AS OF SYSTEM TIME) is CockroachDB's way: it reads a fixed past
// instant, meets no write and is never retried. A millisecond ago is the
// closest to PostgreSQL's "as of the first statement".
func snapshotOptions(d Dialect) pgx.TxOptions {
	if d == CockroachDB {
		return pgx.TxOptions{BeginQuery: `BEGIN TRANSACTION AS OF SYSTEM TIME '-1ms'`}
	}
	return pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
}

// BeginSnapshot starts a read-only transaction over one consistent
// snapshot of the database, for reads too long for the present (an
// export's count and rows), by the pool's dialect.
func (p *Pool) BeginSnapshot(ctx context.Context) (pgx.Tx, error) {
	d, err := p.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	return p.BeginTx(ctx, snapshotOptions(d))
}
