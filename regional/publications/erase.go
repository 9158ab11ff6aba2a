package publications

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of publications: a publication
// keeps its customer's id, and loses the tracking_id that was their
// source_id.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	_, err := tx.Exec(ctx, `UPDATE publications SET tracking_id = NULL WHERE project_id = $1 AND customer_id = $2`,
		projectID, s.CustomerID)
	return err
}
