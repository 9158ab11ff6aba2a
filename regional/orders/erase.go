package orders

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of orders. An order holds its
// customer's id only (its items, amounts and metadata are the order's):
// it stays, as the money record it is, naming the erased id, and is
// counted as the answer's orders.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, n *erasure.Counts) error {
	var k int64
	err := tx.QueryRow(ctx, `SELECT count(*) FROM orders WHERE project_id = $1 AND customer_id = $2`, projectID, s.CustomerID).Scan(&k)
	n.Orders += k
	return err
}
