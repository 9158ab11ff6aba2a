// Package concerns records which customers the failures a job lists
// concern, for their permanent deletion.
//
// A failure a job lists may concern a customer its item named by id or
// source_id, and quote in its reason a value asked for her (a metadata
// schema's "actual value is 'X'") though it names nothing of hers: an
// order's failure is listed by the order's source_id, a bulk of events'
// refusal by its index, a CSV row by its line. Once the job is done its
// input is gone, and nothing else ties that failure to her. So the job
// records, in the transaction that lists it, the customers each failure
// concerns (async_failure_subjects, migration 57, this package's table),
// by the failure's list and place; a permanent deletion finds her
// failures by them (async.EraseCustomer, and the redaction of answers
// meanwhile) and deletes the rows. They are never shown, and live as long
// as the job's row.
package concerns

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/erasure"
)

// Failure is a listed failure's place and the customers (ids or
// source_ids, as the item gave them) its item named.
type Failure struct {
	At   int
	Refs []string
}

// List is a job's list of failures: its project, its job (async action)
// and the list's name in the job's result and checkpoint.
type List struct {
	ProjectID, ActionID, Name string
}

// refsOf is the customers an item named, without empty and repeated ones.
func refsOf(refs []string) []string {
	var out []string
	for _, r := range refs {
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Record records in tx, the transaction that lists them, that the
// failures fs of l concern their customers.
func Record(ctx context.Context, tx db.Querier, l List, fs []Failure) error {
	var refs []string
	var at []int64
	for _, f := range fs {
		for _, r := range refsOf(f.Refs) {
			refs, at = append(refs, r), append(at, int64(f.At))
		}
	}
	if len(refs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO async_failure_subjects (project_id, customer_ref, action_id, list, failure)
		SELECT $1, r, $2, $3, f FROM unnest($4::TEXT[], $5::INT8[]) AS t (r, f) ON CONFLICT DO NOTHING`,
		l.ProjectID, l.ActionID, l.Name, refs, at)
	return err
}

// Of reads the failures of the project's jobs (among actions,
// or all when nil) that concern one of subjects, by job.
func Of(ctx context.Context, q db.Querier, projectID string, subjects []erasure.Subject, actions []string) (
	map[string]erasure.Listed, error) {
	var refs []string
	for _, s := range subjects {
		refs = append(refs, s.Refs()...)
	}
	rows, err := q.Query(ctx, `SELECT action_id, list, failure FROM async_failure_subjects
		WHERE project_id = $1 AND customer_ref = ANY($2) AND ($3::TEXT[] IS NULL OR action_id = ANY($3))`,
		projectID, refsOf(refs), actions)
	if err != nil {
		return nil, err
	}
	by := map[string]erasure.Listed{}
	var action, list string
	var at int64
	_, err = pgx.ForEachRow(rows, []any{&action, &list, &at}, func() error {
		if by[action] == nil {
			by[action] = erasure.Listed{}
		}
		by[action].Add(list, int(at))
		return nil
	})
	return by, err
}

// Forget deletes the rows that tie failures to s: her erasure
// leaves none of her ids and values behind.
func Forget(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject) error {
	_, err := tx.Exec(ctx, `DELETE FROM async_failure_subjects WHERE project_id = $1 AND customer_ref = ANY($2)`,
		projectID, refsOf(s.Refs()))
	return err
}

// Actions are the jobs of by.
func Actions(by map[string]erasure.Listed) []string {
	out := make([]string, 0, len(by))
	for a := range by {
		out = append(out, a)
	}
	return out
}
