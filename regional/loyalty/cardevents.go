package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
)

// A member's activity (regional/loyalty/program) is the card's ledger
// entries and its other events. Changes of points are read from the
// ledger, not repeated beside it; what changes no points (the card's
// publication, tier changes, pending points added, changed or cancelled) is
// a row of loyalty_card_events written in its own change's transaction.
// These are the reads of both, a page at a time, in the activity's order.

// The sources of a member's activity, in their order within an instant.
const (
	RankLedger = iota
	RankCardEvent
)

// cardEventPrefix is the id prefix of loyalty_card_events' rows.
const cardEventPrefix = "evt_"

// Member activity types recorded in loyalty_card_events.
const (
	EventPublishedActivity       = "customer.publication.succeeded"
	EventPendingAddedActivity    = "customer.voucher.loyalty_card.pending_points.added"
	EventPendingUpdatedActivity  = "customer.voucher.loyalty_card.pending_points.updated"
	EventPendingCanceledActivity = "customer.voucher.loyalty_card.pending_points.canceled"
)

// ActivityKey is an activity's place in the list's order: its instant,
// its source (RankLedger, RankCardEvent) and its id.
type ActivityKey struct {
	At   time.Time
	Rank int
	ID   string
}

// Before says k comes before o in ascending order.
func (k ActivityKey) Before(o ActivityKey) bool {
	if !k.At.Equal(o.At) {
		return k.At.Before(o.At)
	}
	if k.Rank != o.Rank {
		return k.Rank < o.Rank
	}
	return k.ID < o.ID
}

// CardEvent is a row of loyalty_card_events: Type is the reference's
// activity type, Data what the event adds to the card's customer, campaign
// and voucher.
type CardEvent struct {
	Key  ActivityKey
	Type string
	Data map[string]any
}

// ActivityKeyOf is the place of the cursor's activity id on card: 400 when
// it is none of the card's.
func (s *Service) ActivityKeyOf(ctx context.Context, projectID string, card *Card, id string) (ActivityKey, error) {
	k := ActivityKey{Rank: RankLedger, ID: id}
	sql := `SELECT created_at FROM loyalty_transactions WHERE project_id = $1 AND id = $2 AND card_id = $3`
	if strings.HasPrefix(id, cardEventPrefix) {
		k.Rank = RankCardEvent
		sql = `SELECT created_at FROM loyalty_card_events WHERE project_id = $1 AND id = $2 AND card_id = $3`
	}
	err := s.pool.QueryRow(ctx, sql, projectID, id, card.ID).Scan(&k.At)
	if errors.Is(err, db.ErrNotFound) {
		return k, apierr.InvalidQuery("starting_after_id", "is not an activity id of this member: give the more_starting_after of the page before")
	}
	return k, err
}

// keysetAfter is the condition of rows of rank after (or, descending,
// before) the cursor, with its arguments appended to args.
func keysetAfter(rank int, lq listq.Query, after *ActivityKey, args []any) (string, []any) {
	if after == nil {
		return "", args
	}
	cmp, _ := listq.Keyset(lq.Desc)
	args = append(args, after.At, after.Rank, after.ID)
	n := len(args)
	return fmt.Sprintf(` AND (created_at, %d, id) %s ($%d::TIMESTAMPTZ, $%d::INT8, $%d::TEXT)`, rank, cmp, n-2, n-1, n), args
}

// PageOfEntries is the card's ledger entries of the page after the cursor
// (nil: from the start), at most lq.Limit+1 of them.
func (s *Service) PageOfEntries(ctx context.Context, projectID, cardID string, lq listq.Query, after *ActivityKey) ([]Transaction, error) {
	cond, args := keysetAfter(RankLedger, lq, after, []any{projectID, cardID})
	_, dir := listq.Keyset(lq.Desc)
	args = append(args, lq.Limit+1)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT `+txColumns+` FROM loyalty_transactions WHERE project_id = $1 AND card_id = $2%s
		ORDER BY created_at %s, id %s LIMIT $%d`, cond, dir, dir, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanTransaction)
}

// PageOfCardEvents is the card's other events of the page after the
// cursor (nil: from the start), at most lq.Limit+1 of them.
func (s *Service) PageOfCardEvents(ctx context.Context, projectID, cardID string, lq listq.Query, after *ActivityKey) ([]CardEvent, error) {
	cond, args := keysetAfter(RankCardEvent, lq, after, []any{projectID, cardID})
	_, dir := listq.Keyset(lq.Desc)
	args = append(args, lq.Limit+1)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT id, type, data, created_at FROM loyalty_card_events
		WHERE project_id = $1 AND card_id = $2%s ORDER BY created_at %s, id %s LIMIT $%d`, cond, dir, dir, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (CardEvent, error) {
		e := CardEvent{Key: ActivityKey{Rank: RankCardEvent}}
		var data []byte
		if err := r.Scan(&e.Key.ID, &e.Type, &data, &e.Key.At); err != nil {
			return e, err
		}
		return e, json.Unmarshal(data, &e.Data)
	})
}

// queueCardEvent queues recording an event of card for its member's
// activity: typ is the reference's activity type, data what the event adds
// to the card's customer, campaign and voucher.
func queueCardEvent(b *pgx.Batch, projectID string, card *Card, typ string, data map[string]any, now time.Time) {
	raw, _ := json.Marshal(data)
	b.Queue(`INSERT INTO loyalty_card_events (project_id, card_id, id, type, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		projectID, card.ID, ids.New(cardEventPrefix), typ, raw, now)
}

// Event queues recording an event of card for its member's activity in
// the write's transaction (regional/earning's pending points).
func (l *LedgerWrite) Event(card *Card, typ string, data map[string]any) {
	queueCardEvent(l.b, l.projectID, card, typ, data, l.now)
}
