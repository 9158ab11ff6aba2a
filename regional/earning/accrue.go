package earning

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/loyalty"
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

// errClaimedMeanwhile is a claim queued with its accrual's writes that found
// the accrual recorded: only a run that did not hold the card's lock could
// have recorded it, so none should; the transaction fails rather than
// credit twice, and the task's next run reads the claim (queueEarned).
var errClaimedMeanwhile = errors.New("earning: the accrual was recorded by another run meanwhile")

// queueEarned queues, in the batch that locks the card key names, the read
// of the rules that earned for event eventID on that card (into earned):
// a custom event's accrual learns which rules an earlier run paid in the
// lock's round trip, and queues its claims with its writes (queueClaim)
// instead of a statement of its own before them. The card's lock, taken
// by every run that claims on it, keeps the read true until the commit.
func queueEarned(b *pgx.Batch, ev eventOf, key string, earned map[string]bool) {
	b.Queue(`SELECT rule_id FROM custom_event_accruals WHERE project_id = $1 AND event_id = $3
		AND card_id = `+loyalty.CardColumnKeyed("c.id", key), ev.projectID, key, ev.eventID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			earned[id] = true
		}
		return rows.Err()
	})
}

// queueClaim queues on w, the accrual's writes, the record of the event's
// accrual by the rule on the card, which fails the transaction when it is
// there already (errClaimedMeanwhile).
func queueClaim(w *pgx.Batch, ev eventOf, ruleID, cardID string, now time.Time) {
	db.QueueChange(w, errClaimedMeanwhile, claimEventAccrual, ev.projectID, ev.eventID, ruleID, cardID, now)
}

// eventOf is a custom event of a project, as its accruals are recorded.
type eventOf struct{ projectID, eventID string }
