package segments

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of segment membership: the customer
// leaves every segment at once (counted as the answer's segments), static
// ones too, without the customer.segment.left notices a change raises,
// which would name the customer after they are gone.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, n *erasure.Counts) error {
	tag, err := tx.Exec(ctx, `DELETE FROM segment_members WHERE project_id = $1 AND customer_id = $2`, projectID, s.CustomerID)
	n.Segments += tag.RowsAffected()
	return err
}
