package main

import (
	"context"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pglocal"
)

// databaseSize is the regional database's size on disk.
func databaseSize(ctx context.Context, srv *pglocal.Server) (int64, error) {
	conn, err := pgx.Connect(ctx, srv.URL("tally"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

// relationSizes are the regional database's tables' sizes on disk, each
// with its indexes and TOAST, by name.
func relationSizes(ctx context.Context, srv *pglocal.Server) (map[string]int64, error) {
	conn, err := pgx.Connect(ctx, srv.URL("tally"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = current_schema()`)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	var name string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		sizes[name] = n
		return nil
	})
	return sizes, err
}

// relationGrowth is a table's growth on disk.
type relationGrowth struct {
	name  string
	bytes int64
}

// relationsGrown are the top tables by growth since before.
func relationsGrown(ctx context.Context, srv *pglocal.Server, before map[string]int64, top int) ([]relationGrowth, error) {
	after, err := relationSizes(ctx, srv)
	if err != nil {
		return nil, err
	}
	var out []relationGrowth
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			out = append(out, relationGrowth{name, d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bytes > out[j].bytes })
	return out[:min(top, len(out))], nil
}
