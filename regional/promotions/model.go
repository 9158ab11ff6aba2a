// Package promotions serves PROMOTION campaigns and their promotion tiers
// (/v1/promotions/…): automatic discounts without codes, each a discount
// (any of the five variants), a hierarchy within its campaign, its own
// window (active, dates, validity timeframe, days and hours) and the
// validation rules assigned to it; and promotion stacks, named groups of a
// campaign's tiers. The campaign row is the one campaign model's
// (regional/campaigns'); this package owns the
// promotion_tiers and promotion_stacks tables, and answers the promotion
// engine (regional/engine) which tiers exist and are active.
package promotions

import (
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Attrs are a tier's properties kept as a document.
type Attrs struct {
	Banner            *string         `json:"banner,omitempty"`
	Discount          json.RawMessage `json:"discount,omitempty"`
	Metadata          map[string]any  `json:"metadata,omitempty"`
	StartDate         *time.Time      `json:"start_date,omitempty"`
	ExpirationDate    *time.Time      `json:"expiration_date,omitempty"`
	ValidityTimeframe json.RawMessage `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week,omitempty"`
	ValidityHours     json.RawMessage `json:"validity_hours,omitempty"`
	Category          *string         `json:"category,omitempty"`
	CategoryID        *string         `json:"category_id,omitempty"`
}

// Tier is a promotion tier.
type Tier struct {
	ID         string
	CampaignID string
	Name       string
	Active     bool
	Hierarchy  int64
	Attrs      Attrs
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// TierRequest is the body of POST /v1/promotions/{campaignId}/tiers, PUT
// /v1/promotions/tiers/{id} and an element of a PROMOTION campaign's
// promotion.tiers: the properties present are set.
type TierRequest struct {
	Name      *string         `json:"name"`
	Banner    *string         `json:"banner"`
	Action    *TierAction     `json:"action"`
	Metadata  json.RawMessage `json:"metadata"`
	Hierarchy *int64          `json:"hierarchy"`
	Active    *bool           `json:"active"`
	campaigns.WindowUpdate
	Category   *string `json:"category"`
	CategoryID *string `json:"category_id"`
	// ValidationRules are rule ids to assign to a new tier.
	ValidationRules []string `json:"validation_rules"`
}

// TierAction is a tier's action: its discount.
type TierAction struct {
	Discount json.RawMessage `json:"discount"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// apply checks r and writes it onto t; creating requires a name and a discount.
func (r TierRequest) apply(t *Tier, creating bool) error {
	switch {
	case creating && (r.Name == nil || *r.Name == ""):
		return apierr.InvalidPayload("name is required: the promotion tier's name")
	case r.Name != nil && (len(*r.Name) > 200 || *r.Name == ""):
		return apierr.InvalidPayload("name is 1 to 200 characters")
	case creating && (r.Action == nil || !present(r.Action.Discount)):
		return apierr.InvalidPayload("action.discount is required: the discount the tier gives")
	case r.Hierarchy != nil && (*r.Hierarchy < 1 || *r.Hierarchy > 1_000_000):
		return apierr.InvalidPayload("hierarchy must be from 1 to 1000000")
	}
	if err := campaigns.CheckText("banner", r.Banner); err != nil {
		return err
	}
	if err := campaigns.CheckValidity(r.ValidityTimeframe, r.ValidityDayOfWeek, r.ValidityHours); err != nil {
		return err
	}
	a := &t.Attrs
	if r.Name != nil {
		t.Name = *r.Name
	}
	if r.Action != nil && present(r.Action.Discount) {
		d, err := vouchers.CheckDiscount(r.Action.Discount, "action.discount")
		if err != nil {
			return err
		}
		a.Discount = d
	}
	if present(r.Metadata) {
		var m map[string]any
		if json.Unmarshal(r.Metadata, &m) != nil {
			return apierr.InvalidPayload("metadata must be an object")
		}
		a.Metadata = m
	}
	if r.Hierarchy != nil {
		t.Hierarchy = *r.Hierarchy
	}
	if r.Active != nil {
		t.Active = *r.Active
	}
	for _, p := range []struct{ dst, v **string }{{&a.Banner, &r.Banner}, {&a.Category, &r.Category}, {&a.CategoryID, &r.CategoryID}} {
		if *p.v != nil {
			*p.dst = *p.v
		}
	}
	return r.WindowUpdate.Apply(&a.StartDate, &a.ExpirationDate, &a.ValidityTimeframe, &a.ValidityDayOfWeek, &a.ValidityHours, campaigns.NullIgnored)
}

// TierView is the reference's PromotionTier.
type TierView struct {
	ID          string         `json:"id"`
	CreatedAt   jsonx.Time     `json:"created_at"`
	UpdatedAt   *jsonx.Time    `json:"updated_at"`
	Name        string         `json:"name"`
	Banner      *string        `json:"banner,omitempty"`
	Action      TierAction     `json:"action"`
	Metadata    map[string]any `json:"metadata"`
	Hierarchy   int64          `json:"hierarchy"`
	PromotionID string         `json:"promotion_id"`
	Campaign    CampaignRef    `json:"campaign"`
	CampaignID  string         `json:"campaign_id"`
	Active      bool           `json:"active"`
	WindowView
	Summary                   Summary        `json:"summary"`
	Object                    string         `json:"object"`
	ValidationRuleAssignments AssignmentList `json:"validation_rule_assignments"`
	CategoryID                *string        `json:"category_id,omitempty"`
	Categories                []any          `json:"categories"`
	assignments               []validation.AssignmentView
}

// CampaignRef is the tier's campaign as its view shows it.
type CampaignRef struct {
	ID string `json:"id"`
	WindowView
	Active     bool    `json:"active"`
	CategoryID *string `json:"category_id,omitempty"`
	Object     string  `json:"object"`
}

// WindowView is the dates and validity a tier's view shows of the tier and
// of its campaign alike, each left out when it has none.
type WindowView struct {
	StartDate         *jsonx.Time     `json:"start_date,omitempty"`
	ExpirationDate    *jsonx.Time     `json:"expiration_date,omitempty"`
	ValidityTimeframe json.RawMessage `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week,omitempty"`
	ValidityHours     json.RawMessage `json:"validity_hours,omitempty"`
}

func windowView(start, expiration *time.Time, timeframe, dayOfWeek, hours json.RawMessage) WindowView {
	return WindowView{StartDate: jsonx.Ptr(start), ExpirationDate: jsonx.Ptr(expiration),
		ValidityTimeframe: timeframe, ValidityDayOfWeek: dayOfWeek, ValidityHours: hours}
}

// Summary are a tier's redemptions and their orders.
type Summary struct {
	Redemptions struct {
		TotalRedeemed int64 `json:"total_redeemed"`
	} `json:"redemptions"`
	Orders struct {
		TotalAmount         int64 `json:"total_amount"`
		TotalDiscountAmount int64 `json:"total_discount_amount"`
	} `json:"orders"`
}

// AssignmentList is a tier's validation rule assignments.
type AssignmentList struct {
	Object  string                      `json:"object"`
	DataRef string                      `json:"data_ref"`
	Data    []validation.AssignmentView `json:"data"`
	Total   int                         `json:"total"`
}

// view renders t with its campaign and rule assignments.
func (t Tier) view(k campaigns.Window, as []validation.AssignmentView, s Summary) TierView {
	a := t.Attrs
	meta := a.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	if as == nil {
		as = []validation.AssignmentView{}
	}
	return TierView{ID: t.ID, CreatedAt: jsonx.Time{Time: t.CreatedAt}, UpdatedAt: jsonx.Ptr(t.UpdatedAt), Name: t.Name,
		Banner: a.Banner, Action: TierAction{Discount: a.Discount}, Metadata: meta, Hierarchy: t.Hierarchy, PromotionID: t.CampaignID,
		Campaign: CampaignRef{ID: k.ID, Active: k.Active, Object: "campaign",
			WindowView: windowView(k.StartDate, k.ExpirationDate, k.ValidityTimeframe, k.ValidityDayOfWeek, k.ValidityHours)},
		CampaignID: t.CampaignID, Active: t.Active,
		WindowView: windowView(a.StartDate, a.ExpirationDate, a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours),
		Summary:    s, Object: "promotion_tier", CategoryID: a.CategoryID, Categories: []any{},
		ValidationRuleAssignments: AssignmentList{Object: "list", DataRef: "data", Data: as, Total: len(as)}, assignments: as}
}
