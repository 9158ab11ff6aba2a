package redemptions

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
	"github.com/tallyhq/tally/regional/loyalty"
)

// EraseCustomer is the erasure.Eraser of reward redemptions: a redemption
// with points from the customer's cards keeps its points and card (the
// ledger adds up), and the answer it stored, and its rollback's, lose the
// customer's personal data.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	cards, err := loyalty.HeldCards(ctx, tx, projectID, s.CustomerID)
	if err != nil || len(cards) == 0 {
		return err
	}
	if _, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, view FROM redemptions WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`,
		[]any{projectID, cards}, `UPDATE redemptions SET view = $3 WHERE project_id = $1 AND id = $2`); err != nil {
		return err
	}
	_, err = erasure.Rows(ctx, tx, projectID, s, `SELECT id, view FROM redemption_rollbacks WHERE project_id = $1
		AND redemption_id IN (SELECT id FROM redemptions WHERE project_id = $1 AND card_id = ANY($2::TEXT[]))`,
		[]any{projectID, cards}, `UPDATE redemption_rollbacks SET view = $3 WHERE project_id = $1 AND id = $2`)
	return err
}
