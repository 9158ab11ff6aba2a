package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/internal/dbtrace"
)

// Querier is what store functions take: a pool and a transaction both satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Options tune a pool; zero values take defaults.
type Options struct {
	MaxConns       int32
	ConnectTimeout time.Duration
	// Name is set as application_name, so the database shows who is connected.
	Name string
}

// Open connects a pool to url with tracing on every query. It does not fail
// when the database is down: the pool connects lazily, so a service can start
// and report itself unready instead of crash-looping.
func Open(ctx context.Context, url string, o Options) (*Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: parse url: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if o.Name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.Name
	}
	// A span per query and per batch (not per batched statement).
	cfg.ConnConfig.Tracer = dbtrace.New()
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: open pool: %w", err)
	}
	return &Pool{Pool: pool}, nil
}
