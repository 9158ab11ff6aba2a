package segments

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of segment membership: the customer
// leaves every segment at once (counted as the answer's segments), static
// ones too, and each exit raises customer.segment.left in the deletion's
// transaction, as any membership change does. A subscriber that keeps a
// segment's members learns that this one is gone; the notice names the
// customer by id only ({id, object: "customer"}), which is no personal
// data and which the erasure's redaction leaves (erasure.Subject.Redact
// blanks an object that is the customer of its personal properties, and
// this one has none), and the segment as every membership notice does.
// Unlike a change, it is raised for static segments too: a permanent
// deletion ends those memberships as well, and nothing else would say so.
func (s *Service) EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, subj erasure.Subject, n *erasure.Counts) error {
	rows, err := tx.Query(ctx, `DELETE FROM segment_members WHERE project_id = $1 AND customer_id = $2 RETURNING segment_id`,
		projectID, subj.CustomerID)
	if err != nil {
		return err
	}
	segIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	n.Segments += int64(len(segIDs))
	if len(segIDs) == 0 || !s.notify.Listens(ctx, projectID, Left) {
		return nil
	}
	segs, err := db.Collect(scan)(tx.Query(ctx, `SELECT `+columns+` FROM segments WHERE project_id = $1 AND id = ANY($2) ORDER BY id`,
		projectID, segIDs))
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, seg := range segs {
		if err := s.queueNotice(ctx, b, projectID, Left, seg, subj.CustomerID, nil); err != nil {
			return err
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}
