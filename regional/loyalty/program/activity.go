package program

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
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
	loyalty.PointsAccrual:           "customer.rewarded.loyalty_points",
	loyalty.PendingPointsActivation: "customer.voucher.loyalty_card.pending_points.activated",
	loyalty.PointsAddition:          "customer.voucher.loyalty_card.points_added",
	loyalty.PointsRemoval:           "customer.voucher.loyalty_card.points_added",
	loyalty.PointsTransferIn:        "customer.voucher.loyalty_card.points_transferred",
	loyalty.PointsTransferOut:       "customer.voucher.loyalty_card.points_transferred",
	loyalty.PointsExpiration:        "customer.voucher.loyalty_card.points_expired",
	loyalty.PointsRedemption:        "customer.reward_redemptions.created",
	loyalty.PointsRefund:            "customer.reward_redemptions.rolledback",
}

// internalTypes are the entries Tally makes by itself (earning, the
// sweeps), whose event source is INTERNAL rather than the API.
var internalTypes = map[string]bool{loyalty.PointsAccrual: true, loyalty.PendingPointsActivation: true, loyalty.PointsExpiration: true}

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

func (h handler) activity(c echo.Context) error {
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
	acts, more, next, err := h.progs.MemberActivity(c.Request().Context(), loyalty.CardRefOf(c), lq)
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
func (s *Service) MemberActivity(ctx context.Context, ref loyalty.CardRef, lq listq.Query) ([]Activity, bool, string, error) {
	card, camp, err := s.cards.Card(ctx, s.pool, ref)
	if err != nil {
		return nil, false, "", err
	}
	var after *loyalty.ActivityKey
	if lq.After != "" {
		k, err := s.cards.ActivityKeyOf(ctx, ref.Project, &card, lq.After)
		if err != nil {
			return nil, false, "", err
		}
		after = &k
	}
	entries, err := s.cards.PageOfEntries(ctx, ref.Project, card.ID, lq, after)
	if err != nil {
		return nil, false, "", err
	}
	events, err := s.cards.PageOfCardEvents(ctx, ref.Project, card.ID, lq, after)
	if err != nil {
		return nil, false, "", err
	}
	page, more, next := mergePage(card, camp, entries, events, lq)
	return page, more, next, nil
}

// mergePage is the page of lq of card's activity from a page of each
// source (each at most lq.Limit+1, in lq's order): merged in the list's
// order, with whether more follow and the cursor of the next page.
func mergePage(card loyalty.Card, camp loyalty.Campaign, entries []loyalty.Transaction, events []loyalty.CardEvent,
	lq listq.Query) ([]Activity, bool, string) {
	all := make([]keyedActivity, 0, len(entries)+len(events))
	for _, t := range entries {
		all = append(all, keyedActivity{loyalty.ActivityKey{At: t.CreatedAt.Time, Rank: loyalty.RankLedger, ID: t.ID}, activityOf(card, camp, t)})
	}
	for _, e := range events {
		all = append(all, keyedActivity{e.Key, eventActivityOf(card, camp, e)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key.Before(all[j].key) != lq.Desc })
	return listq.PageOf(all, lq.Limit, func(a keyedActivity) string { return a.act.ID },
		func(a keyedActivity) Activity { return a.act })
}

type keyedActivity struct {
	key loyalty.ActivityKey
	act Activity
}

// baseData is what every activity of card says: its holder, campaign and
// the card itself.
func baseData(card loyalty.Card, camp loyalty.Campaign) map[string]any {
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

func eventActivityOf(card loyalty.Card, camp loyalty.Campaign, e loyalty.CardEvent) Activity {
	data := baseData(card, camp)
	for k, v := range e.Data {
		data[k] = v
	}
	channel := "API"
	if strings.HasPrefix(e.Type, "customer.loyalty.tier.") || e.Type == loyalty.EventPendingAddedActivity {
		channel = "INTERNAL"
	}
	return Activity{ID: e.Key.ID, Type: e.Type, CreatedAt: jsonx.Time{Time: e.Key.At},
		Data: map[string]any{"data": data, "event_source": map[string]any{"channel": channel}}}
}

// activityOf is the activity of ledger entry t of card: the event's data
// as the reference shapes the entry's type (customer, campaign, voucher,
// balance and the transaction itself), and its source.
func activityOf(card loyalty.Card, camp loyalty.Campaign, t loyalty.Transaction) Activity {
	typ, ok := activityTypes[t.Type]
	if !ok { // a type a later change adds: shown as a change of points
		typ = activityTypes[loyalty.PointsAddition]
	}
	var details struct {
		Balance map[string]any `json:"balance"`
	}
	_ = json.Unmarshal(t.Details, &details)
	data := baseData(card, camp)
	data["transaction"] = t
	switch t.Type {
	case loyalty.PointsRedemption, loyalty.PointsRefund:
		// These events' balance is the card's points after the entry.
		data["holder"] = data["customer"]
		if b, ok := details.Balance["balance"]; ok {
			data["balance"] = b
		}
		data["source"] = "API"
	case loyalty.PointsExpiration:
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
