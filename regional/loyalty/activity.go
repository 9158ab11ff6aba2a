package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
)

// A member's activity (GET /v1/loyalties/[{campaignId}/]members/{memberId}/activity)
// is the card's ledger entries and its other events. Changes of points are
// read from the ledger, not repeated beside it: every one is an entry there,
// written in the change's transaction, so the activity can neither miss one
// nor tell a different story than the card's transactions do, and the
// ledger's hot path writes nothing more. What changes no points (the card's
// publication, tier changes, pending points added, changed or cancelled) is
// a row of loyalty_card_events written in its own change's transaction. An
// entry's id is its activity's id, and the two merge by time.

// activityTypes is the reference's member activity type of each ledger
// entry type. A removal has no type of its own in the reference: it is
// points_added with a negative transaction, as POST …/balance takes
// negative points for both.
var activityTypes = map[string]string{
	PointsAccrual:           "customer.rewarded.loyalty_points",
	PendingPointsActivation: "customer.voucher.loyalty_card.pending_points.activated",
	PointsAddition:          "customer.voucher.loyalty_card.points_added",
	PointsRemoval:           "customer.voucher.loyalty_card.points_added",
	PointsTransferIn:        "customer.voucher.loyalty_card.points_transferred",
	PointsTransferOut:       "customer.voucher.loyalty_card.points_transferred",
	PointsExpiration:        "customer.voucher.loyalty_card.points_expired",
	PointsRedemption:        "customer.reward_redemptions.created",
	PointsRefund:            "customer.reward_redemptions.rolledback",
}

// internalTypes are the entries Tally makes by itself (earning, the
// sweeps), whose event source is INTERNAL rather than the API.
var internalTypes = map[string]bool{PointsAccrual: true, PendingPointsActivation: true, PointsExpiration: true}

// Activity is the reference's MemberActivity.
type Activity struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Data      map[string]any `json:"data"`
	CreatedAt jsonx.Time     `json:"created_at"`
	GroupID   *string        `json:"group_id"`
}

// activitySpec: the reference's limit, order (created_at or -created_at,
// the newest first without one, as the card's history reads) and cursor;
// no page and no filters.
var activitySpec = listq.Spec{Orders: []string{"-created_at", "created_at"}}

func (h Handler) activity(c echo.Context) error {
	q := c.QueryParams()
	if err := listq.Unserved(q, "page", "filters", "type", "start_date", "end_date"); err != nil {
		return err
	}
	lq, err := listq.Parse(q, activitySpec)
	if err != nil {
		return err
	}
	if len(lq.After) > 200 {
		return apierr.InvalidQuery("starting_after_id", "is not an activity id of this member")
	}
	acts, more, next, err := h.svc.MemberActivity(c.Request().Context(), CardRefOf(c), lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[Activity]{Data: acts, More: more, Next: next})
}

// MemberActivity is a page of the activity of the card ref names: 404 for
// an unknown card, or, in the campaign form, a card of another program.
// It merges the card's ledger entries with its other events
// (loyalty_card_events), both ordered by (created_at, source, id), a
// ledger entry before an event of the same instant (a tier change after
// the entry that caused it); the cursor is the last activity's id, whose
// prefix says which table holds it.
func (s *Service) MemberActivity(ctx context.Context, ref CardRef, lq listq.Query) ([]Activity, bool, string, error) {
	card, camp, err := s.card(ctx, s.pool, ref, false)
	if err != nil {
		return nil, false, "", err
	}
	var after *activityKey
	if lq.After != "" {
		k, err := s.activityKeyOf(ctx, ref.Project, card.ID, lq.After)
		if err != nil {
			return nil, false, "", err
		}
		after = &k
	}
	entries, err := s.pageOfEntries(ctx, ref.Project, card.ID, lq, after)
	if err != nil {
		return nil, false, "", err
	}
	events, err := s.pageOfCardEvents(ctx, ref.Project, card.ID, lq, after)
	if err != nil {
		return nil, false, "", err
	}
	all := make([]keyedActivity, 0, len(entries)+len(events))
	for _, t := range entries {
		all = append(all, keyedActivity{activityKey{t.CreatedAt.Time, rankLedger, t.ID}, activityOf(card, camp, t)})
	}
	for _, e := range events {
		all = append(all, keyedActivity{e.key, eventActivityOf(card, camp, e)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key.before(all[j].key) != lq.Desc })
	page, more, next := listq.PageOf(all, lq.Limit, func(a keyedActivity) string { return a.act.ID },
		func(a keyedActivity) Activity { return a.act })
	return page, more, next, nil
}

// The sources of a member's activity, in their order within an instant.
const (
	rankLedger = iota
	rankCardEvent
)

// cardEventPrefix is the id prefix of loyalty_card_events' rows.
const cardEventPrefix = "evt_"

// activityKey is an activity's place in the list's order.
type activityKey struct {
	at   time.Time
	rank int
	id   string
}

func (k activityKey) before(o activityKey) bool {
	if !k.at.Equal(o.at) {
		return k.at.Before(o.at)
	}
	if k.rank != o.rank {
		return k.rank < o.rank
	}
	return k.id < o.id
}

type keyedActivity struct {
	key activityKey
	act Activity
}

// activityKeyOf is the place of the cursor's activity: 400 when it is
// none of the card's.
func (s *Service) activityKeyOf(ctx context.Context, projectID, cardID, id string) (activityKey, error) {
	k := activityKey{rank: rankLedger, id: id}
	sql := `SELECT created_at FROM loyalty_transactions WHERE project_id = $1 AND id = $2 AND card_id = $3`
	if strings.HasPrefix(id, cardEventPrefix) {
		k.rank = rankCardEvent
		sql = `SELECT created_at FROM loyalty_card_events WHERE project_id = $1 AND id = $2 AND card_id = $3`
	}
	err := s.pool.QueryRow(ctx, sql, projectID, id, cardID).Scan(&k.at)
	if errors.Is(err, db.ErrNotFound) {
		return k, apierr.InvalidQuery("starting_after_id", "is not an activity id of this member: give the more_starting_after of the page before")
	}
	return k, err
}

// keysetAfter is the condition of rows of rank after (or, descending,
// before) the cursor, with its arguments appended to args.
func keysetAfter(rank int, lq listq.Query, after *activityKey, args []any) (string, []any) {
	if after == nil {
		return "", args
	}
	cmp, _ := listq.Keyset(lq.Desc)
	args = append(args, after.at, after.rank, after.id)
	n := len(args)
	return fmt.Sprintf(` AND (created_at, %d, id) %s ($%d::TIMESTAMPTZ, $%d::INT8, $%d::TEXT)`, rank, cmp, n-2, n-1, n), args
}

// pageOfEntries is the card's ledger entries of the page, at most
// lq.Limit+1 of them.
func (s *Service) pageOfEntries(ctx context.Context, projectID, cardID string, lq listq.Query, after *activityKey) ([]Transaction, error) {
	cond, args := keysetAfter(rankLedger, lq, after, []any{projectID, cardID})
	_, dir := listq.Keyset(lq.Desc)
	args = append(args, lq.Limit+1)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT id, source_id, card_id, campaign_id, source, reason, type, details,
		related_transaction_id, created_at, delta FROM loyalty_transactions WHERE project_id = $1 AND card_id = $2%s
		ORDER BY created_at %s, id %s LIMIT $%d`, cond, dir, dir, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transaction, error) {
		var t Transaction
		var details []byte
		err := r.Scan(&t.ID, &t.SourceID, &t.VoucherID, &t.CampaignID, &t.Source, &t.Reason, &t.Type, &details,
			&t.RelatedTransactionID, &t.CreatedAt.Time, &t.Delta)
		t.Details = details
		return t, err
	})
}

// cardEvent is a row of loyalty_card_events.
type cardEvent struct {
	key  activityKey
	typ  string
	data map[string]any
}

func (s *Service) pageOfCardEvents(ctx context.Context, projectID, cardID string, lq listq.Query, after *activityKey) ([]cardEvent, error) {
	cond, args := keysetAfter(rankCardEvent, lq, after, []any{projectID, cardID})
	_, dir := listq.Keyset(lq.Desc)
	args = append(args, lq.Limit+1)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT id, type, data, created_at FROM loyalty_card_events
		WHERE project_id = $1 AND card_id = $2%s ORDER BY created_at %s, id %s LIMIT $%d`, cond, dir, dir, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (cardEvent, error) {
		e := cardEvent{key: activityKey{rank: rankCardEvent}}
		var data []byte
		if err := r.Scan(&e.key.id, &e.typ, &data, &e.key.at); err != nil {
			return e, err
		}
		return e, json.Unmarshal(data, &e.data)
	})
}

// queueCardEvent queues recording an event of card cardID for its
// member's activity: typ is the reference's activity type, data what the
// event adds to the card's customer, campaign and voucher.
func queueCardEvent(b *pgx.Batch, projectID, cardID, typ string, data map[string]any, now time.Time) {
	raw, _ := json.Marshal(data)
	b.Queue(`INSERT INTO loyalty_card_events (project_id, card_id, id, type, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		projectID, cardID, ids.New(cardEventPrefix), typ, raw, now)
}

// Event queues recording an event of card for its member's activity in
// the write's transaction (regional/earning's pending points).
func (l *LedgerWrite) Event(card *Card, typ string, data map[string]any) {
	queueCardEvent(l.b, l.projectID, card.ID, typ, data, l.now)
}

// baseData is what every activity of card says: its holder, campaign and
// the card itself.
func baseData(card Card, camp Campaign) map[string]any {
	var customer any
	if card.HolderID != nil {
		customer = map[string]any{"id": *card.HolderID, "object": "customer"}
	}
	return map[string]any{
		"customer": customer,
		"campaign": map[string]any{"id": camp.ID, "name": camp.Name, "campaign_type": camp.CampaignType,
			"type": camp.Attrs.Type, "object": "campaign"},
		"voucher": map[string]any{"id": card.ID, "code": card.Code, "campaign_id": card.CampaignID,
			"holder_id": card.HolderID, "type": "LOYALTY_CARD", "object": "voucher"},
	}
}

func eventActivityOf(card Card, camp Campaign, e cardEvent) Activity {
	data := baseData(card, camp)
	for k, v := range e.data {
		data[k] = v
	}
	channel := "API"
	if strings.HasPrefix(e.typ, "customer.loyalty.tier.") || e.typ == EventPendingAddedActivity {
		channel = "INTERNAL"
	}
	return Activity{ID: e.key.id, Type: e.typ, CreatedAt: jsonx.Time{Time: e.key.at},
		Data: map[string]any{"data": data, "event_source": map[string]any{"channel": channel}}}
}

// Member activity types recorded in loyalty_card_events.
const (
	EventPublishedActivity       = "customer.publication.succeeded"
	EventPendingAddedActivity    = "customer.voucher.loyalty_card.pending_points.added"
	EventPendingUpdatedActivity  = "customer.voucher.loyalty_card.pending_points.updated"
	EventPendingCanceledActivity = "customer.voucher.loyalty_card.pending_points.canceled"
)

// activityOf is the activity of ledger entry t of card: the event's data
// as the reference shapes the entry's type (customer, campaign, voucher,
// balance and the transaction itself), and its source.
func activityOf(card Card, camp Campaign, t Transaction) Activity {
	typ, ok := activityTypes[t.Type]
	if !ok { // a type a later change adds: shown as a change of points
		typ = activityTypes[PointsAddition]
	}
	var details struct {
		Balance map[string]any `json:"balance"`
	}
	_ = json.Unmarshal(t.Details, &details)
	data := baseData(card, camp)
	data["transaction"] = t
	switch t.Type {
	case PointsRedemption, PointsRefund:
		// These events' balance is the card's points after the entry.
		data["holder"] = data["customer"]
		if b, ok := details.Balance["balance"]; ok {
			data["balance"] = b
		}
		data["source"] = "API"
	case PointsExpiration:
		data["points"] = -t.Delta
	default:
		if details.Balance != nil {
			data["balance"] = details.Balance
		}
	}
	channel := "API"
	if internalTypes[t.Type] {
		channel = "INTERNAL"
	}
	return Activity{ID: t.ID, Type: typ, CreatedAt: t.CreatedAt,
		Data: map[string]any{"data": data, "event_source": map[string]any{"channel": channel}}}
}
