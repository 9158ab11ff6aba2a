package regionaltest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

var prepared atomic.Int64

// Explain prepares sql on the server as the services' driver does and
// returns the plan PostgreSQL executes it by with args under the plan
// cache mode ("force_custom_plan" or "force_generic_plan"), so that a
// test sees the generic plan a statement gets after five executions.
func Explain(ctx context.Context, p *db.Pool, mode, sql string, args []any) (string, error) {
	tx, err := p.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	simple := pgx.QueryExecModeSimpleProtocol
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode, simple); err != nil {
		return "", err
	}
	// A prepared statement outlives the transaction: each gets its own name.
	name := fmt.Sprintf("explained_%d", prepared.Add(1))
	if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+sql, simple); err != nil {
		return "", err
	}
	ps := make([]string, len(args))
	for i := range args {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	// The simple protocol writes args into the text as literals.
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE "+name+"("+strings.Join(ps, ", ")+")", append([]any{simple}, args...)...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
