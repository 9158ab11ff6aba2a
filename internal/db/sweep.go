package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SweepBatch is how many rows a background sweep deletes per statement
// unless told otherwise: each statement is its own short transaction, where
// one DELETE of every expired row could be one transaction over millions of
// rows (on CockroachDB: large intents, contention, retries of the whole).
const SweepBatch = 1000

// Sweep deletes every row of Table that matches Where, in statements of at
// most Batch rows, each its own transaction (an implicit one: run it on a
// pool, not in a transaction). Each statement is
//
//	DELETE FROM t WHERE (key) IN (SELECT key FROM t WHERE … ORDER BY … LIMIT n)
//
// which PostgreSQL and CockroachDB both take (PostgreSQL has no
// DELETE … LIMIT). Batches take rows in Order, each starting after the last
// row the one before deleted, so that none scans again what an earlier one
// deleted (on CockroachDB the deleted rows stay as tombstones in the index
// until garbage collection). Order is the columns of an index that serves
// Where followed by the primary key's columns (CockroachDB's secondary
// indexes end in them), so each batch is a short range of that index.
type Sweep struct {
	Table string
	Where string   // the rows to delete; $1… are Args
	Args  []any    //
	Order []string // an index's columns serving Where, then the primary key's
	Key   []string // the primary key's columns
	Batch int      // rows per statement; SweepBatch when 0
}

// Swept is what a sweep did.
type Swept struct {
	Rows    int64 // rows deleted
	Batches int   // statements run
	Largest int64 // rows the largest statement deleted
}

// Run deletes in batches until one deletes fewer than Batch rows, or ctx
// ends (its error then, with what was done so far). Between batches it rests
// as long as the last batch took, so a sweep holds the database at most
// half the time of one connection and slows down when the database is busy.
func (s Sweep) Run(ctx context.Context, q Querier) (Swept, error) {
	batch := s.Batch
	if batch <= 0 {
		batch = SweepBatch
	}
	order := strings.Join(s.Order, ", ")
	desc := strings.Join(s.Order, " DESC, ") + " DESC"
	key := strings.Join(s.Key, ", ")
	var out Swept
	var last []any // the last row deleted, in Order
	for {
		where, args := s.Where, s.Args
		if last != nil {
			ph := make([]string, len(last))
			for i := range last {
				ph[i] = fmt.Sprintf("$%d", len(args)+i+1)
			}
			where = "(" + where + ") AND (" + order + ") > (" + strings.Join(ph, ", ") + ")"
			args = append(args[:len(args):len(args)], last...)
		}
		// The count of the rows deleted and the last of them in one answer.
		sql := fmt.Sprintf(`WITH gone AS (DELETE FROM %[1]s WHERE (%[2]s) IN (
			SELECT %[2]s FROM %[1]s WHERE %[3]s ORDER BY %[4]s LIMIT %[5]d) RETURNING %[4]s)
			SELECT count(*) OVER (), %[4]s FROM gone ORDER BY %[6]s LIMIT 1`,
			s.Table, key, where, order, batch, desc)
		start := time.Now()
		var n int64
		next := make([]any, len(s.Order))
		err := Statement(ctx, func(ctx context.Context) error {
			n = 0
			dest := make([]any, 0, len(next)+1)
			dest = append(dest, &n)
			for i := range next {
				dest = append(dest, &next[i])
			}
			err := q.QueryRow(ctx, sql, args...).Scan(dest...)
			if errors.Is(err, ErrNotFound) || errors.Is(err, pgx.ErrNoRows) {
				return nil // nothing (more) to delete
			}
			return err
		})
		if err != nil {
			return out, err
		}
		out.Batches++
		out.Rows += n
		out.Largest = max(out.Largest, n)
		if n < int64(batch) {
			return out, nil
		}
		last = next
		if err := Rest(ctx, time.Since(start)); err != nil {
			return out, err
		}
	}
}

// Rest waits d, or less when ctx ends first (its error then): the pause
// between a sweep's batches, so that a sweep does not hold the database.
func Rest(ctx context.Context, d time.Duration) error { return sleep(ctx, max(d, time.Millisecond)) }

// EachBatch runs batch until it says it is done or fails, resting between
// batches as long as the last one took (Rest), so that a sweep of
// application-level batches (one transaction per item, say) does not hold
// the database either.
func EachBatch(ctx context.Context, batch func(ctx context.Context) (done bool, err error)) error {
	for {
		start := time.Now()
		done, err := batch(ctx)
		if err != nil || done {
			return err
		}
		if err := Rest(ctx, time.Since(start)); err != nil {
			return err
		}
	}
}
