package earning

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/txshared"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/segments"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/tenancy"
)

// Schemas reads a project's custom event schemas, which custom event rules
// are checked against: the directory's, through the cached resolver
// (tenancy.Resolver).
type Schemas interface {
	EventSchemas(ctx context.Context, projectID string) ([]tenancy.EventSchema, error)
}

// customEventRef is a rule's custom_event: the schema its event follows.
type customEventRef struct {
	SchemaID string `json:"schema_id"`
}

// checkCustomEvent checks a custom event rule against its schema: the
// rule names the schema of its event by custom_event.schema_id, and a
// proportional rule counts a number property of it.
func (s *Service) checkCustomEvent(ctx context.Context, projectID string, r EarningRule, where string) error {
	if r.Event == "order.paid" || r.Event == SegmentEntered || isTierEvent(r.Event) {
		if present(r.Attrs.CustomEventRaw) {
			return apierr.InvalidPayload(where + "custom_event goes with custom event rules, not " + r.Event)
		}
		if r.Event == SegmentEntered {
			return segments.CheckAutoUpdate(ctx, s.pool, projectID, r.Attrs.Segment.ID)
		}
		return nil
	}
	var ref customEventRef
	if !present(r.Attrs.CustomEventRaw) || json.Unmarshal(r.Attrs.CustomEventRaw, &ref) != nil || ref.SchemaID == "" {
		return apierr.InvalidPayload(where + "a custom event rule needs custom_event.schema_id, the id (ms_…) of its event's schema")
	}
	if s.schemas == nil {
		return apierr.Unavailable("Custom event schemas cannot be read on this instance.")
	}
	all, err := s.schemas.EventSchemas(ctx, projectID)
	if err != nil {
		return err
	}
	for _, sc := range all {
		if sc.ID != ref.SchemaID {
			continue
		}
		if sc.Name != r.Event {
			return apierr.InvalidPayload(fmt.Sprintf("%scustom_event.schema_id %s is the schema of %q, not of event %q", where, sc.ID, sc.Name, r.Event))
		}
		if m := r.Attrs.Loyalty.CustomEvent; m != nil && m.Metadata != nil {
			p, ok := sc.Properties[m.Metadata.Property]
			if !ok || p.Deleted || p.Type != tenancy.PropNumber {
				return apierr.InvalidPayload(fmt.Sprintf("%sloyalty.custom_event.metadata.property %q is not a number property of the schema %s",
					where, m.Metadata.Property, sc.Name))
			}
		}
		return nil
	}
	return apierr.NotFound("custom_event_schema", ref.SchemaID)
}

// CustomEvent is a stored custom event, as its accrual reads it.
type CustomEvent struct {
	ID          string  `json:"id"`
	Type        string  `json:"type"`
	CustomerID  string  `json:"customer_id"`
	LoyaltyCode *string `json:"loyalty_code,omitempty"`
	// CardID is the card loyalty.code named when the event was stored,
	// and HolderID its holder: what the accrual locks, and in which order.
	CardID     string         `json:"card_id,omitempty"`
	HolderID   string         `json:"holder_id,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	SchemaID   string         `json:"schema_id"`
	SchemaName string         `json:"schema_name"`
	Metadata   map[string]any `json:"metadata"`
}

// maxEventPoints bounds what one rule gives for one event.
const maxEventPoints = 1_000_000_000_000

// positive reports whether n is a number above zero.
func positive(n json.Number) bool {
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.Sign() > 0 && len(n) <= 40
}

// pointsFor is what the rule gives for the event's metadata: FIXED points,
// or points for every whole `every` of a number property, in exact
// decimal arithmetic (0.3 is three tenths) and never past maxEventPoints.
func (r RulePoints) pointsFor(meta map[string]any) int64 {
	if r.Type == "FIXED" && r.Points != nil {
		return *r.Points
	}
	by := r.CustomEvent
	if r.CalculationType == "CUSTOMER_METADATA" {
		by = r.Customer
	} else if r.CalculationType != "CUSTOM_EVENT_METADATA" {
		return 0
	}
	if by == nil || by.Metadata == nil {
		return 0
	}
	m := by.Metadata
	var text string
	switch x := meta[m.Property].(type) {
	case json.Number:
		text = x.String()
	case float64:
		text = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return 0
	}
	v, ok := new(big.Rat).SetString(text)
	every, ok2 := new(big.Rat).SetString(string(m.Every))
	if !ok || !ok2 || v.Sign() <= 0 || every.Sign() <= 0 || len(text) > 40 {
		return 0
	}
	units := new(big.Int).Quo(new(big.Int).Mul(v.Num(), every.Denom()), new(big.Int).Mul(v.Denom(), every.Num()))
	pts := new(big.Int).Mul(units, big.NewInt(m.Points))
	if pts.Sign() <= 0 {
		return 0
	}
	if pts.Cmp(big.NewInt(maxEventPoints)) > 0 {
		return maxEventPoints
	}
	return pts.Int64()
}

// eventRulesKey names, in a batch of accrual tasks (txshared.Get), the
// active rules of a project's custom event type.
type eventRulesKey struct{ projectID, event string }

// eventRules are the active rules of the project's event type by campaign,
// each campaign's in id order. Read once for a batch of accruals
// (txshared.Get): at 500 events/s, one read a task was a fifth of the
// accruals' statements.
func eventRules(ctx context.Context, q pgx.Tx, projectID, event string) (map[string][]EarningRule, error) {
	rows, err := q.Query(ctx, `SELECT `+ruleColumns+` FROM earning_rules WHERE project_id = $1 AND event = $2 AND active
		ORDER BY campaign_id, id`, projectID, event)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EarningRule, error) { return scanRule(r) })
	if err != nil {
		return nil, err
	}
	byCampaign := map[string][]EarningRule{}
	for _, r := range all {
		byCampaign[r.CampaignID] = append(byCampaign[r.CampaignID], r)
	}
	return byCampaign, nil
}

// AccrueEvent earns for a custom event, in tx (READ COMMITTED, the card
// rows locked in id order): on the card loyalty.code names, or else on
// each of the customer's cards in a campaign with a live rule for the
// event, each rule once per (event, rule, card) whatever runs it again.
func (s *Service) AccrueEvent(ctx context.Context, tx pgx.Tx, projectID string, ev CustomEvent) error {
	byCampaign, err := txshared.Get(ctx, eventRulesKey{projectID, ev.Type}, func() (map[string][]EarningRule, error) {
		return eventRules(ctx, tx, projectID, ev.Type)
	})
	if err != nil || len(byCampaign) == 0 {
		return err
	}
	var keys []string
	switch {
	case ev.CardID != "":
		keys = []string{ev.CardID}
	case ev.LoyaltyCode != nil:
		keys = []string{*ev.LoyaltyCode}
	default:
		if keys, err = s.prog.CardsOf(ctx, tx, projectID, ev.CustomerID); err != nil {
			return err
		}
	}
	now := s.Now()
	// A rule earns if it was live when the event happened, however late
	// its task runs.
	at := ev.CreatedAt
	if at.IsZero() {
		at = now
	}
	pass := s.gate(ctx, tx, projectID, func() (rules.Input, *customers.Customer, error) {
		c, err := customerOf(ctx, tx, projectID, ev.CustomerID)
		return rules.Input{Customer: ruleCustomer(c), Event: &rules.Event{Type: ev.Type, Metadata: ev.Metadata}, Now: at}, c, err
	})
	evRef := map[string]any{"id": ev.ID, "type": ev.Type}
	schemaRef := map[string]any{"id": ev.SchemaID, "name": ev.SchemaName}
	var earned map[string]bool // the rules that earned for the event on the card locked, by id
	readEarned := func(b *pgx.Batch, key string) {
		earned = map[string]bool{}
		queueEarned(b, eventOf{projectID, ev.ID}, key, earned)
	}
	return s.eachLockedCard(ctx, tx, projectID, keys, now, readEarned, func(card *loyalty.LockedCard, w *pgx.Batch, l *loyalty.LedgerWrite) error {
		holder := tiers.Of(card.Campaign.Tiers, card.Balance)
		for _, r := range byCampaign[card.CampaignID] {
			pts := r.earns(at, holder, func(p RulePoints) int64 { return p.pointsFor(ev.Metadata) })
			if pts <= 0 || earned[r.ID] {
				continue
			}
			if ok, err := pass(r); err != nil || !ok {
				if err != nil {
					return err
				}
				continue // the event's context does not meet the rule's validation rule
			}
			queueClaim(w, eventOf{projectID, ev.ID}, r.ID, card.ID, now)
			if err := s.credit(ctx, w, l, projectID, card, r, pts, now, nil,
				map[string]any{"custom_event": evRef, "event_schema": schemaRef, "earning_rule": ruleRef(r)}, holder); err != nil {
				return err
			}
		}
		return nil
	})
}
