package earning

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// An accrual is recorded once per (source, rule, card) before its points
// are credited, so that a task run again earns nothing twice: an order's
// in loyalty_accruals, a custom event's, a segment entry's and a tier
// move's in custom_event_accruals (their ids are of one kind, events').
const (
	claimOrderAccrual = `INSERT INTO loyalty_accruals (project_id, order_id, rule_id, card_id, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
	claimEventAccrual = `INSERT INTO custom_event_accruals (project_id, event_id, rule_id, card_id, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
)

// accrues reports whether rule r, giving pts points, credits the card
// now: it gives some, the event's context meets its validation rule
// (pass), and this run is the first to claim the accrual (claim, one of
// the statements above, with its arguments).
func accrues(ctx context.Context, tx pgx.Tx, r EarningRule, pts int64, pass func(EarningRule) (bool, error),
	claim string, args ...any) (bool, error) {
	if pts <= 0 {
		return false, nil
	}
	if ok, err := pass(r); err != nil || !ok {
		return false, err // !ok: the event's context does not meet the rule's validation rule
	}
	tag, err := tx.Exec(ctx, claim, args...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil // 0: earned by an earlier run
}

// ruleRef is an earning rule as an accrual's details name it.
func ruleRef(r EarningRule) map[string]any {
	return map[string]any{"id": r.ID, "source": map[string]any{"banner": r.Attrs.Banner}}
}
