package stacked

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of stacked redemptions: each keeps
// its amounts and the customer's id, and loses the tracking_id that was
// their source_id; the answers it and its rollback stored lose the
// customer's personal data.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	if _, err := tx.Exec(ctx, `UPDATE stacked_redemptions SET tracking_id = NULL WHERE project_id = $1 AND customer_id = $2`,
		projectID, s.CustomerID); err != nil {
		return err
	}
	if _, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, view FROM stacked_redemptions WHERE project_id = $1 AND customer_id = $2`,
		[]any{projectID, s.CustomerID}, `UPDATE stacked_redemptions SET view = $3 WHERE project_id = $1 AND id = $2`); err != nil {
		return err
	}
	_, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, view FROM stacked_rollbacks WHERE project_id = $1
		AND redemption_id IN (SELECT id FROM stacked_redemptions WHERE project_id = $1 AND customer_id = $2)`,
		[]any{projectID, s.CustomerID}, `UPDATE stacked_rollbacks SET view = $3 WHERE project_id = $1 AND id = $2`)
	return err
}
