package async

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// EraseCustomer is the erasure.Eraser of the outbox and async actions:
// webhook payloads waiting to be sent (and those sent, until the purge
// takes them) and action results that copied the customer lose their
// personal data, so nothing sent or read after the erasure carries it.
// The rows are found by the customer's id or values in their text: a
// scan of the project's outbox and actions, which the purge keeps short.
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	cond, args := s.Mention("payload::TEXT", []any{projectID})
	if _, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, payload FROM outbox WHERE project_id = $1 AND `+cond, args,
		`UPDATE outbox SET payload = $3 WHERE project_id = $1 AND id = $2`); err != nil {
		return err
	}
	cond, args = s.Mention("result::TEXT", []any{projectID})
	_, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, result FROM async_actions WHERE project_id = $1 AND result IS NOT NULL AND `+cond,
		args, `UPDATE async_actions SET result = $3 WHERE project_id = $1 AND id = $2`)
	return err
}
