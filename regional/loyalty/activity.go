package loyalty

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
)

// A member's activity (GET /v1/loyalties/[{campaignId}/]members/{memberId}/activity)
// is read from the card's ledger, not kept beside it: every change of a
// card's points is an entry there, written in the change's transaction, so
// the activity can neither miss one nor tell a different story than the
// card's transactions do, and the ledger's hot path writes nothing more.
// An entry's id is its activity's id, so the reference's cursor
// (starting_after_id) and order (created_at, which is id order) page the
// ledger's index by card.

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
func (s *Service) MemberActivity(ctx context.Context, ref CardRef, lq listq.Query) ([]Activity, bool, string, error) {
	card, camp, err := s.card(ctx, s.pool, ref, false)
	if err != nil {
		return nil, false, "", err
	}
	args := []any{ref.Project, card.ID}
	cond, orderBy, args := lq.Keyset("loyalty_transactions", "id", args)
	args = append(args, lq.Limit+1)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT id, source_id, card_id, campaign_id, source, reason, type, details,
		related_transaction_id, created_at, delta FROM loyalty_transactions WHERE project_id = $1 AND card_id = $2%s
		ORDER BY %s LIMIT $%d`, cond, orderBy, len(args)), args...)
	if err != nil {
		return nil, false, "", err
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transaction, error) {
		var t Transaction
		var details []byte
		err := r.Scan(&t.ID, &t.SourceID, &t.VoucherID, &t.CampaignID, &t.Source, &t.Reason, &t.Type, &details,
			&t.RelatedTransactionID, &t.CreatedAt.Time, &t.Delta)
		t.Details = details
		return t, err
	})
	if err != nil {
		return nil, false, "", err
	}
	ts, more, next := listq.Page(ts, lq.Limit, func(t Transaction) string { return t.ID })
	acts := make([]Activity, 0, len(ts))
	for _, t := range ts {
		acts = append(acts, activityOf(card, camp, t))
	}
	return acts, more, next, nil
}

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
	var customer any
	if card.HolderID != nil {
		customer = map[string]any{"id": *card.HolderID, "object": "customer"}
	}
	data := map[string]any{
		"customer": customer,
		"campaign": map[string]any{"id": camp.ID, "name": camp.Name, "campaign_type": camp.CampaignType,
			"type": camp.Attrs.Type, "object": "campaign"},
		"voucher": map[string]any{"id": card.ID, "code": card.Code, "campaign_id": card.CampaignID,
			"holder_id": card.HolderID, "type": "LOYALTY_CARD", "object": "voucher"},
		"transaction": t,
	}
	switch t.Type {
	case PointsRedemption, PointsRefund:
		// These events' balance is the card's points after the entry.
		data["holder"] = customer
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
