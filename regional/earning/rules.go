package earning

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/loyalty/expiry"
	"github.com/tallyhq/tally/regional/tiers"
)

// EarningRule is how a loyalty program gives points for an event: an order
// paid, or a custom event.
type EarningRule struct {
	ID         string
	CampaignID string
	Event      string
	Active     bool
	Attrs      RuleAttrs
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// RuleAttrs is the rule as the API writes it.
type RuleAttrs struct {
	Loyalty         RulePoints      `json:"loyalty"`
	CustomEventRaw  json.RawMessage `json:"custom_event,omitempty"`
	Segment         *IDRef          `json:"segment,omitempty"` // of a customer.segment.entered rule
	LoyaltyTier     *IDRef          `json:"loyalty_tier,omitempty"`
	PendingPoints   *PendingPeriod  `json:"pending_points,omitempty"`
	Banner          *string         `json:"banner,omitempty"`
	StartDate       *time.Time      `json:"start_date,omitempty"`
	ExpirationDate  *time.Time      `json:"expiration_date,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitempty"`
	ExpirationRules *expiry.Rules   `json:"expiration_rules,omitempty"`
	// ValidationRuleID is the validation rule the event's context must
	// pass for the rule to earn.
	ValidationRuleID *string `json:"validation_rule_id,omitempty"`
	// The validity windows, kept as written (campaigns.CheckValidity) and
	// read by campaigns.InWindow, as a voucher's are.
	ValidityTimeframe json.RawMessage `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week,omitempty"`
	ValidityHours     json.RawMessage `json:"validity_hours,omitempty"`
}

// RulePoints is how many points a rule gives.
type RulePoints struct {
	Type            string      `json:"type"`
	Points          *int64      `json:"points,omitempty"`
	CalculationType string      `json:"calculation_type,omitempty"`
	Order           *RuleAmount `json:"order,omitempty"`
	// CustomEvent is the proportional rule of a custom event: points for
	// every so much of a numeric metadata property.
	CustomEvent *RuleEventMetadata `json:"custom_event,omitempty"`
	// Customer is the proportional rule of a segment entry
	// (CUSTOMER_METADATA): points for every so much of a numeric
	// property of the customer's metadata.
	Customer *RuleEventMetadata `json:"customer,omitempty"`
}

// RuleEventMetadata is {metadata: {every, points, property}}.
type RuleEventMetadata struct {
	Metadata *EveryProperty `json:"metadata"`
}

// EveryProperty gives points for every `every` of a metadata property.
type EveryProperty struct {
	Every    json.Number `json:"every"` // kept as written: 0.1 is a tenth, exactly
	Points   int64       `json:"points"`
	Property string      `json:"property"`
}

// RuleAmount is the proportional rule: points for every so much.
type RuleAmount struct {
	Amount      *Every `json:"amount,omitempty"`
	TotalAmount *Every `json:"total_amount,omitempty"`
}

// Every gives points for every `every` units of an amount.
type Every struct {
	Every  int64 `json:"every"`
	Points int64 `json:"points"`
}

// IDRef names an object.
type IDRef struct {
	ID string `json:"id"`
}

// PendingPeriod keeps earned points pending for some days.
type PendingPeriod struct {
	PeriodType  string `json:"period_type"`
	PeriodValue int    `json:"period_value"`
}

// points are what the rule gives for an order of amount and total amount
// (nil: unknown).
func (r RulePoints) points(amount, total *int64) int64 {
	switch {
	case r.Type == "FIXED" && r.Points != nil:
		return *r.Points
	case r.Order != nil && r.CalculationType == "ORDER_AMOUNT" && r.Order.Amount != nil && amount != nil:
		return *amount / r.Order.Amount.Every * r.Order.Amount.Points
	case r.Order != nil && r.CalculationType == "ORDER_TOTAL_AMOUNT" && r.Order.TotalAmount != nil && total != nil:
		return *total / r.Order.TotalAmount.Every * r.Order.TotalAmount.Points
	}
	return 0
}

// live says whether the rule applies at t: active, within its dates and
// inside its validity windows. A timeframe counts its intervals from the
// start date, or from the rule's creation when it has none.
func (r EarningRule) live(t time.Time) bool {
	a := r.Attrs
	if !r.Active || a.StartDate != nil && t.Before(*a.StartDate) || a.ExpirationDate != nil && !t.Before(*a.ExpirationDate) {
		return false
	}
	from := r.CreatedAt
	if a.StartDate != nil {
		from = *a.StartDate
	}
	return campaigns.InWindow(a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours, &from, t)
}

// earns is what the rule gives a holder in tier holder (nil: none) at t:
// the points of its own terms (asked of points only then) mapped by the
// tier where it maps the rule, or none where the rule is not live at t or
// is scoped to another tier. Orders and custom events earn by it alike.
func (r EarningRule) earns(t time.Time, holder *tiers.Tier, points func(RulePoints) int64) int64 {
	if !r.live(t) || !r.inTier(holder) {
		return 0
	}
	pts := points(r.Attrs.Loyalty)
	if m, ok := holder.RuleMapping(r.ID); ok {
		pts = m.Apply(pts)
	}
	return pts
}

// inTier says whether the rule earns for a holder in tier t (nil: none).
func (r EarningRule) inTier(t *tiers.Tier) bool {
	scope := r.Attrs.LoyaltyTier
	if anyTier(scope) {
		return true
	}
	return t != nil && t.ID == scope.ID
}

// anyTier is a rule's tier scope that names no tier, or any (__ANY__).
func anyTier(ref *IDRef) bool { return ref == nil || ref.ID == "" || ref.ID == "__ANY__" }

// checkTier is 404 for a rule's tier scope naming no tier of the project
// (never another project's) and, for a tier event, no tier of the rule's
// own program, whose cards alone move through it.
func (s *Service) checkTier(ctx context.Context, q db.Querier, projectID, campaignID string, r EarningRule) error {
	ref := r.Attrs.LoyaltyTier
	if anyTier(ref) {
		return nil
	}
	if isTierEvent(r.Event) {
		return tiers.CheckRefOf(ctx, q, campaigns.ItemRef{Project: projectID, Campaign: campaignID, ID: ref.ID})
	}
	return tiers.CheckRef(ctx, q, projectID, ref.ID)
}

// RuleView is the reference shape of an earning rule.
type RuleView struct {
	ID             string          `json:"id"`
	CreatedAt      jsonx.Time      `json:"created_at"`
	UpdatedAt      *jsonx.Time     `json:"updated_at"`
	Loyalty        RulePoints      `json:"loyalty"`
	Event          string          `json:"event"`
	CustomEvent    json.RawMessage `json:"custom_event"`
	Segment        any             `json:"segment"`
	LoyaltyTier    *IDRef          `json:"loyalty_tier"`
	PendingPoints  *PendingPeriod  `json:"pending_points"`
	Source         map[string]any  `json:"source"`
	Object         string          `json:"object"`
	AutomationID   *string         `json:"automation_id"`
	StartDate      *jsonx.Time     `json:"start_date"`
	ExpirationDate *jsonx.Time     `json:"expiration_date"`
	// The reference types these as non-nullable objects and arrays, and strictly
	// typed clients reject a null: absent ones are left out, as in its examples.
	ValidityTimeframe any            `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek any            `json:"validity_day_of_week,omitempty"`
	ValidityHours     any            `json:"validity_hours,omitempty"`
	Metadata          map[string]any `json:"metadata"`
	ExpirationRules   *expiry.Rules  `json:"expiration_rules,omitempty"` // not nullable either
	ValidationRuleID  *string        `json:"validation_rule_id"`
	Active            bool           `json:"active"`
}

// View renders the rule.
func (r EarningRule) View() RuleView {
	a := r.Attrs
	v := RuleView{ID: r.ID, CreatedAt: jsonx.Time{Time: r.CreatedAt}, UpdatedAt: jsonx.Ptr(r.UpdatedAt), Loyalty: a.Loyalty,
		Event: r.Event, CustomEvent: a.CustomEventRaw, LoyaltyTier: a.LoyaltyTier, PendingPoints: a.PendingPoints,
		Source: map[string]any{"banner": a.Banner, "object_id": r.CampaignID, "object_type": "campaign"}, Object: "earning_rule",
		StartDate: jsonx.Ptr(a.StartDate), ExpirationDate: jsonx.Ptr(a.ExpirationDate), Metadata: a.Metadata,
		ExpirationRules: a.ExpirationRules, ValidationRuleID: a.ValidationRuleID, Active: r.Active}
	if present(a.ValidityTimeframe) {
		v.ValidityTimeframe = a.ValidityTimeframe
	}
	if present(a.ValidityDayOfWeek) {
		v.ValidityDayOfWeek = a.ValidityDayOfWeek
	}
	if present(a.ValidityHours) {
		v.ValidityHours = a.ValidityHours
	}
	if v.CustomEvent == nil {
		v.CustomEvent = json.RawMessage("null")
	}
	if a.Segment != nil {
		v.Segment = a.Segment
	}
	if v.Metadata == nil {
		v.Metadata = map[string]any{}
	}
	return v
}

// RuleRequest is one rule of POST …/earning-rules, or the body of PUT.
type RuleRequest struct {
	Event         *string         `json:"event"`
	Loyalty       *RulePoints     `json:"loyalty"`
	CustomEvent   json.RawMessage `json:"custom_event"`
	Segment       json.RawMessage `json:"segment"`
	LoyaltyTier   *IDRef          `json:"loyalty_tier"`
	PendingPoints *PendingPeriod  `json:"pending_points"`
	Source        *struct {
		Banner *string `json:"banner"`
	} `json:"source"`
	Active            *bool           `json:"active"`
	StartDate         *time.Time      `json:"start_date"`
	ExpirationDate    *time.Time      `json:"expiration_date"`
	Metadata          map[string]any  `json:"metadata"`
	ExpirationRules   *expiry.Rules   `json:"expiration_rules"`
	ValidationRuleID  json.RawMessage `json:"validation_rule_id"` // null drops the rule
	ValidityTimeframe json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week"`
	ValidityHours     json.RawMessage `json:"validity_hours"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// applyRule writes a request onto a rule, checking it.
func applyRule(r *EarningRule, q RuleRequest, create bool, where string) error {
	bad := func(msg string) error { return apierr.InvalidPayload(where + msg) }
	if q.Event != nil {
		if !create && *q.Event != r.Event {
			return bad("event cannot be changed; create a new rule")
		}
		switch ev := *q.Event; {
		case ev == "order.paid" || ev == SegmentEntered:
		case strings.HasPrefix(ev, "customer.loyalty.tier."):
			if !slices.Contains(TierEvents, ev) {
				return bad("event " + ev + " is not a tier event: customer.loyalty.tier.joined, left, upgraded, downgraded or prolonged")
			}
		case ev == "" || len(ev) > 300 || strings.ContainsRune(ev, 0):
			return bad("event must be order.paid or a custom event name of 1 to 300 characters")
		}
		r.Event = *q.Event
	} else if create {
		return bad("event is required: order.paid or a custom event name")
	}
	if present(q.Segment) {
		var ref IDRef
		if r.Event != SegmentEntered {
			return bad("segment goes with customer.segment.entered rules")
		}
		if json.Unmarshal(q.Segment, &ref) != nil || ref.ID == "" {
			return bad("segment must be {id}, the id of an auto-update segment")
		}
		r.Attrs.Segment = &ref
	} else if create && r.Event == SegmentEntered {
		return bad("segment.id is required: the auto-update segment whose entering customers earn")
	}
	if q.Loyalty != nil {
		l, err := checkPoints(r.Event, *q.Loyalty, bad)
		if err != nil {
			return err
		}
		r.Attrs.Loyalty = l
	} else if create {
		return bad("loyalty is required: {type: FIXED, points} or {type: PROPORTIONAL, calculation_type, order}")
	}
	if present(q.CustomEvent) {
		r.Attrs.CustomEventRaw = q.CustomEvent
	}
	if q.LoyaltyTier != nil {
		r.Attrs.LoyaltyTier = q.LoyaltyTier
	}
	if isTierEvent(r.Event) && (r.Attrs.LoyaltyTier == nil || r.Attrs.LoyaltyTier.ID == "") {
		return bad("loyalty_tier.id is required for a " + r.Event + " rule: the id of a tier of this program, or __ANY__")
	}
	if q.PendingPoints != nil {
		p := q.PendingPoints
		if r.Event != "order.paid" {
			return bad("pending_points go with order.paid rules")
		}
		if p.PeriodType != "DAY" || p.PeriodValue < 1 || p.PeriodValue > 90 {
			return bad("pending_points is {period_type: DAY, period_value: 1 to 90}")
		}
		r.Attrs.PendingPoints = p
	}
	if q.Source != nil && q.Source.Banner != nil {
		if err := loyalty.CheckText("source.banner", q.Source.Banner); err != nil {
			return err
		}
		r.Attrs.Banner = q.Source.Banner
	}
	if q.Active != nil {
		r.Active = *q.Active
	}
	if q.StartDate != nil {
		r.Attrs.StartDate = q.StartDate
	}
	if q.ExpirationDate != nil {
		r.Attrs.ExpirationDate = q.ExpirationDate
	}
	if r.Attrs.StartDate != nil && r.Attrs.ExpirationDate != nil && !r.Attrs.ExpirationDate.After(*r.Attrs.StartDate) {
		return bad("expiration_date must be after start_date")
	}
	if q.Metadata != nil {
		r.Attrs.Metadata = q.Metadata
	}
	if err := applyWindows(r, q, where); err != nil {
		return err
	}
	if q.ExpirationRules != nil {
		if err := expiry.Check(q.ExpirationRules); err != nil {
			return err
		}
		r.Attrs.ExpirationRules = q.ExpirationRules
	}
	return nil
}

// checkPoints checks what a rule on event gives and keeps of it only the
// properties its type and calculation read.
func checkPoints(event string, l RulePoints, bad func(string) error) (RulePoints, error) {
	switch l.Type {
	case "FIXED":
		if l.Points == nil || *l.Points <= 0 || *l.Points > 1_000_000_000 {
			return l, bad("loyalty.points must be a positive number of points for a FIXED rule")
		}
		l.CalculationType, l.Order, l.CustomEvent, l.Customer = "", nil, nil, nil
	case "PROPORTIONAL":
		if isTierEvent(event) {
			return l, bad("a " + event + " rule gives FIXED points only: loyalty {type: FIXED, points}")
		}
		if event == SegmentEntered {
			m := l.Customer
			if l.CalculationType != "CUSTOMER_METADATA" || m == nil || m.Metadata == nil {
				return l, bad("a PROPORTIONAL customer.segment.entered rule has calculation_type CUSTOMER_METADATA with customer.metadata {every, points, property}")
			}
			if e := m.Metadata; !positive(e.Every) || e.Points <= 0 || e.Points > 1_000_000_000 || e.Property == "" || len(e.Property) > 100 {
				return l, bad("loyalty.customer.metadata needs a positive every and points and the name of a number property")
			}
			l.Points, l.Order, l.CustomEvent = nil, nil, nil
			return l, nil
		}
		l.Customer = nil
		if event != "order.paid" {
			m := l.CustomEvent
			if l.CalculationType != "CUSTOM_EVENT_METADATA" || m == nil || m.Metadata == nil {
				return l, bad("a PROPORTIONAL custom event rule has calculation_type CUSTOM_EVENT_METADATA with custom_event.metadata {every, points, property}")
			}
			if e := m.Metadata; !positive(e.Every) || e.Points <= 0 || e.Points > 1_000_000_000 || e.Property == "" || len(e.Property) > 100 {
				return l, bad("loyalty.custom_event.metadata needs a positive every and points and the name of a number property")
			}
			l.Points, l.Order = nil, nil
			return l, nil
		}
		l.CustomEvent = nil
		var e *Every
		switch {
		case l.CalculationType == "ORDER_AMOUNT" && l.Order != nil:
			e, l.Order.TotalAmount = l.Order.Amount, nil
		case l.CalculationType == "ORDER_TOTAL_AMOUNT" && l.Order != nil:
			e, l.Order.Amount = l.Order.TotalAmount, nil
		default:
			return l, bad("a PROPORTIONAL rule has calculation_type ORDER_AMOUNT with order.amount, or ORDER_TOTAL_AMOUNT with order.total_amount")
		}
		if e == nil || e.Every <= 0 || e.Points <= 0 || e.Points > 1_000_000_000 {
			return l, bad("every and points of a PROPORTIONAL rule must be positive")
		}
		l.Points = nil
	default:
		return l, bad("loyalty.type must be FIXED or PROPORTIONAL")
	}
	return l, nil
}

const ruleColumns = `id, campaign_id, event, active, attrs, created_at, updated_at`

func scanRule(row pgx.Row) (EarningRule, error) {
	var r EarningRule
	var attrs []byte
	if err := row.Scan(&r.ID, &r.CampaignID, &r.Event, &r.Active, &attrs, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return EarningRule{}, err
	}
	return r, json.Unmarshal(attrs, &r.Attrs)
}

func saveRule(ctx context.Context, q db.Querier, projectID string, r EarningRule, insert bool) error {
	attrs, err := json.Marshal(r.Attrs)
	if err != nil {
		return err
	}
	if insert {
		_, err = q.Exec(ctx, `INSERT INTO earning_rules (project_id, `+ruleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			projectID, r.ID, r.CampaignID, r.Event, r.Active, attrs, r.CreatedAt, r.UpdatedAt)
		return err
	}
	_, err = q.Exec(ctx, `UPDATE earning_rules SET active = $3, attrs = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
		projectID, r.ID, r.Active, attrs, r.UpdatedAt)
	return err
}

// rulesOf reads a campaign's rules for an event (all events when "").
func rulesOf(ctx context.Context, q db.Querier, projectID, campaignID, event string) ([]EarningRule, error) {
	rows, err := q.Query(ctx, `SELECT `+ruleColumns+` FROM earning_rules WHERE project_id = $1 AND campaign_id = $2
		AND ($3 = '' OR event = $3) ORDER BY id`, projectID, campaignID, event)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EarningRule, error) { return scanRule(r) })
}

// CreateRules adds earning rules to a campaign, all or none.
func (s *Service) CreateRules(ctx context.Context, projectID, campaignID string, qs []RuleRequest) ([]RuleView, error) {
	if len(qs) == 0 || len(qs) > 100 {
		return nil, apierr.InvalidPayload("the body is a list of 1 to 100 earning rules")
	}
	var out []RuleView
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		camp, err := s.prog.Campaign(ctx, tx, projectID, campaignID)
		if err != nil {
			return err
		}
		for i, q := range qs {
			r := EarningRule{ID: ids.New("ern_"), CampaignID: camp.ID, Active: true, CreatedAt: s.Now()}
			if err := applyRule(&r, q, true, fmt.Sprintf("[%d].", i)); err != nil {
				return err
			}
			if err := s.meta.CheckMetadata(ctx, projectID, "earning_rule", r.Attrs.Metadata); err != nil {
				return err
			}
			if err := s.checkCustomEvent(ctx, projectID, r, fmt.Sprintf("[%d].", i)); err != nil {
				return err
			}
			if err := s.checkTier(ctx, tx, projectID, camp.ID, r); err != nil {
				return err
			}
			if err := saveRule(ctx, tx, projectID, r, true); err != nil {
				return err
			}
			if err := s.assignRule(ctx, tx, projectID, r); err != nil {
				return err
			}
			out = append(out, r.View())
		}
		return nil
	})
	return out, err
}

// ruleRows are a campaign's earning rules.
var ruleRows = loyalty.NewCampaignPart("earning_rules", ruleColumns, "earning_rule", scanRule)

// GetRule reads a rule of a campaign.
func (s *Service) GetRule(ctx context.Context, ref campaigns.ItemRef) (RuleView, error) {
	r, err := ruleRows.Get(ctx, s.prog, s.pool, ref, false)
	return r.View(), err
}

// UpdateRule changes a rule (PUT, and enable/disable with only active).
func (s *Service) UpdateRule(ctx context.Context, ref campaigns.ItemRef, q RuleRequest) (RuleView, error) {
	projectID := ref.Project
	var out EarningRule
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := ruleRows.Get(ctx, s.prog, tx, ref, true)
		if err != nil {
			return err
		}
		if err := applyRule(&r, q, false, ""); err != nil {
			return err
		}
		if q.Metadata != nil { // replaced whole when sent
			if err := s.meta.CheckMetadata(ctx, projectID, "earning_rule", r.Attrs.Metadata); err != nil {
				return err
			}
		}
		if err := s.checkCustomEvent(ctx, projectID, r, ""); err != nil {
			return err
		}
		if q.LoyaltyTier != nil {
			if err := s.checkTier(ctx, tx, projectID, r.CampaignID, r); err != nil {
				return err
			}
		}
		if len(q.ValidationRuleID) > 0 {
			if err := s.assignRule(ctx, tx, projectID, r); err != nil {
				return err
			}
		}
		now := s.Now()
		r.UpdatedAt = &now
		out = r
		return saveRule(ctx, tx, projectID, r, false)
	})
	return out.View(), err
}

// DeleteRule removes a rule.
func (s *Service) DeleteRule(ctx context.Context, ref campaigns.ItemRef) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := ruleRows.Get(ctx, s.prog, tx, ref, true)
		if err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM earning_rules WHERE project_id = $1 AND id = $2`, ref.Project, r.ID); err != nil {
			return err
		}
		if r.Attrs.ValidationRuleID == nil || s.rules == nil {
			return nil
		}
		return s.rules.SetAssignmentIn(ctx, tx, ref.Project, "earning_rule", r.ID, "")
	})
}

// ListRules lists a campaign's rules.
func (s *Service) ListRules(ctx context.Context, projectID, campaignID string, lq listq.Query) ([]RuleView, int, error) {
	camp, err := s.prog.Campaign(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return nil, 0, err
	}
	rs, err := rulesOf(ctx, s.pool, projectID, camp.ID, "")
	if err != nil {
		return nil, 0, err
	}
	// rulesOf reads in id order, which is creation order.
	if lq.Key == "updated_at" {
		at := func(r EarningRule) time.Time {
			if r.UpdatedAt != nil {
				return *r.UpdatedAt
			}
			return r.CreatedAt
		}
		slices.SortStableFunc(rs, func(a, b EarningRule) int { return at(a).Compare(at(b)) })
	}
	if lq.Desc {
		slices.Reverse(rs)
	}
	// The campaign's rules are read whole (a campaign has few), so the
	// page is cut from them.
	page, _ := listq.Window(rs, lq)
	vs := make([]RuleView, 0, len(page))
	for _, r := range page {
		vs = append(vs, r.View())
	}
	return vs, len(rs), nil
}
