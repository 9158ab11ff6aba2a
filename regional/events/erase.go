package events

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of custom events and the customer's
// activity, and their counts: all go, counted as the answer's events and customer_events.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, n *erasure.Counts) error {
	tag, err := tx.Exec(ctx, `DELETE FROM custom_events WHERE project_id = $1 AND customer_id = $2`, projectID, s.CustomerID)
	if err != nil {
		return err
	}
	n.Events += tag.RowsAffected()
	if tag, err = tx.Exec(ctx, `DELETE FROM customer_activities WHERE project_id = $1 AND customer_id = $2`,
		projectID, s.CustomerID); err != nil {
		return err
	}
	n.CustomerEvents += tag.RowsAffected()
	// The counts are no personal data but name the customer; they go
	// with the events they count.
	_, err = tx.Exec(ctx, `DELETE FROM customer_event_counts WHERE project_id = $1 AND customer_id = $2`, projectID, s.CustomerID)
	return err
}
