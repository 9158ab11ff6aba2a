package events

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// Counts are the customers' counts of custom events by name, kept in
// customer_event_counts, which this package owns: what a segment's
// events.<name>.count condition reads (segments.EventCounts), in SQL over
// the customers table and in Go for the customers a change names.
type Counts struct{}

// CountSQL is the count of the events named by the placeholder name of
// the customer of the enclosing query's customers row (0 when none).
func (Counts) CountSQL(name string) string {
	return `COALESCE((SELECT ec.count FROM customer_event_counts AS ec WHERE ec.project_id = customers.project_id
		AND ec.customer_id = customers.id AND ec.event_name = ` + name + `::TEXT), 0)`
}

// Counts are the counts of the events named names of the customers ids,
// by customer and name; a count that is not there is 0.
func (Counts) Counts(ctx context.Context, q db.Querier, projectID string, ids, names []string) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	if len(ids) == 0 || len(names) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT customer_id, event_name, count FROM customer_event_counts
		WHERE project_id = $1 AND customer_id = ANY($2) AND event_name = ANY($3)`, projectID, ids, names)
	if err != nil {
		return nil, err
	}
	var id, name string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &name, &n}, func() error {
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][name] = n
		return nil
	})
	return out, err
}

// countEvent queues on b the increment of the customer's count of events
// of the name, in the transaction that records the event.
func countEvent(b *pgx.Batch, projectID, customerID, name string) {
	b.Queue(`INSERT INTO customer_event_counts (project_id, customer_id, event_name, count) VALUES ($1, $2, $3, 1)
		ON CONFLICT (project_id, customer_id, event_name) DO UPDATE SET count = customer_event_counts.count + 1`,
		projectID, customerID, name)
}
