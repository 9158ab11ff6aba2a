// Package vouchers owns the vouchers table (discount vouchers and gift
// cards; loyalty cards stay in regional/loyalty); a code is unique in a
// project across every voucher type through regional/vouchercodes. Its
// campaign types (DISCOUNT_COUPONS, GIFT_VOUCHERS, and REFERRAL_PROGRAM's
// codes) are rows of regional/campaigns' one model, their voucher template
// (Template) this package's; the campaigns as the API serves them (their
// creation request, template updates, generation, adding vouchers, their
// campaigns.Kind) are regional/vouchers/campaign, built on this package's
// Generate, CountOfCampaign and Campaign.
// The voucher jobs (imports, bulk metadata updates) are regional/vouchers/bulk,
// built on this package: it writes through Imported, InsertMany, Locked and
// QueueAttrs, and every statement on the tables stays here.
package vouchers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/categories"
)

// Voucher types this package serves.
const (
	Discount = "DISCOUNT_VOUCHER"
	Gift     = "GIFT_VOUCHER"
)

// GiftFigures are a gift card's credits, in cents.
type GiftFigures struct {
	Amount           int64   `json:"amount"`
	SubtractedAmount int64   `json:"subtracted_amount"`
	Balance          int64   `json:"balance"`
	Effect           *string `json:"effect,omitempty"`
}

// Attrs are a voucher's properties kept as a document.
type Attrs struct {
	Discount          json.RawMessage `json:"discount,omitempty"`
	Gift              *GiftFigures    `json:"gift,omitempty"`
	StartDate         *time.Time      `json:"start_date,omitempty"`
	ExpirationDate    *time.Time      `json:"expiration_date,omitempty"`
	ValidityTimeframe json.RawMessage `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week,omitempty"`
	ValidityHours     json.RawMessage `json:"validity_hours,omitempty"`
	Metadata          map[string]any  `json:"metadata,omitempty"`
	AdditionalInfo    *string         `json:"additional_info,omitempty"`
}

// Voucher is a row of vouchers.
type Voucher struct {
	ID           string
	Code         string
	CampaignID   *string
	CampaignName *string // joined when read
	Type         string
	Attrs        Attrs
	Category     *string // the name written (the tag shown when CategoryID is nil)
	CategoryID   *string
	Cat          *categories.Category // the category CategoryID names, joined when read
	Active       bool
	Quantity     *int64
	Redeemed     int64
	HolderID     *string
	CreatedAt    time.Time
	UpdatedAt    *time.Time
	Referral     bool    // a code of a referral program (joined when read)
	campaignType *string // its campaign's type (joined when read)
}

// View is the reference's Voucher shape.
type View struct {
	ID                         string            `json:"id"`
	Code                       string            `json:"code"`
	Campaign                   *string           `json:"campaign"`
	CampaignID                 *string           `json:"campaign_id"`
	Category                   *string           `json:"category"`
	CategoryID                 *string           `json:"category_id"`
	Categories                 []categories.View `json:"categories"`
	Type                       string            `json:"type"`
	Discount                   json.RawMessage   `json:"discount,omitempty"`
	Gift                       *GiftFigures      `json:"gift"`
	LoyaltyCard                *struct{}         `json:"loyalty_card"`
	StartDate                  *jsonx.Time       `json:"start_date"`
	ExpirationDate             *jsonx.Time       `json:"expiration_date"`
	ValidityTimeframe          json.RawMessage   `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek          json.RawMessage   `json:"validity_day_of_week,omitempty"`
	ValidityHours              json.RawMessage   `json:"validity_hours,omitempty"`
	Active                     bool              `json:"active"`
	AdditionalInfo             *string           `json:"additional_info"`
	Metadata                   map[string]any    `json:"metadata"`
	IsReferralCode             bool              `json:"is_referral_code"`
	HolderID                   *string           `json:"holder_id"`
	CreatedAt                  jsonx.Time        `json:"created_at"`
	UpdatedAt                  *jsonx.Time       `json:"updated_at"`
	Redemption                 RedemptionView    `json:"redemption"`
	Publish                    PublishView       `json:"publish"`
	ValidationRulesAssignments ListView          `json:"validation_rules_assignments"`
	Object                     string            `json:"object"`
}

// RedemptionView is a voucher's redemption figures.
type RedemptionView struct {
	Quantity         *int64 `json:"quantity"`
	RedeemedQuantity int64  `json:"redeemed_quantity"`
	Object           string `json:"object"`
	URL              string `json:"url"`
}

// PublishView is a voucher's publication figures.
type PublishView struct {
	Object string `json:"object"`
	Count  int64  `json:"count"`
	URL    string `json:"url"`
}

// ListView is an empty embedded list.
type ListView struct {
	Object  string `json:"object"`
	DataRef string `json:"data_ref"`
	Data    []any  `json:"data"`
	Total   int    `json:"total"`
}

// View renders the voucher.
func (v Voucher) View() View {
	a := v.Attrs
	meta := a.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	cat, catID, cats := v.category()
	esc := v.Code
	return View{ID: v.ID, Code: v.Code, Campaign: v.CampaignName, CampaignID: v.CampaignID, Category: cat,
		CategoryID: catID, Categories: cats, Type: v.Type, Discount: a.Discount, Gift: a.Gift,
		StartDate: jsonx.Ptr(a.StartDate), ExpirationDate: jsonx.Ptr(a.ExpirationDate),
		ValidityTimeframe: a.ValidityTimeframe, ValidityDayOfWeek: a.ValidityDayOfWeek, ValidityHours: a.ValidityHours,
		Active: v.Active, AdditionalInfo: a.AdditionalInfo, Metadata: meta, HolderID: v.HolderID, IsReferralCode: v.Referral,
		CreatedAt: jsonx.Time{Time: v.CreatedAt}, UpdatedAt: jsonx.Ptr(v.UpdatedAt),
		Redemption: RedemptionView{Quantity: v.Quantity, RedeemedQuantity: v.Redeemed, Object: "list",
			URL: "/v1/vouchers/" + esc + "/redemptions?page=1&limit=10"},
		Publish:                    PublishView{Object: "list", URL: "/v1/vouchers/" + esc + "/publications?page=1&limit=10"},
		ValidationRulesAssignments: ListView{Object: "list", DataRef: "data", Data: []any{}},
		Object:                     "voucher"}
}

// category is the voucher's category as the answer shows it: the one its
// category_id names (none once that is deleted), else the tag it was
// written with (before categories, or by a writer that does not resolve).
func (v Voucher) category() (name, id *string, cats []categories.View) {
	switch {
	case v.Cat != nil:
		return &v.Cat.Name, &v.Cat.ID, []categories.View{v.Cat.View()}
	case v.CategoryID == nil:
		return v.Category, nil, []categories.View{}
	}
	return nil, nil, []categories.View{}
}

// categoryName is category's name in SQL (v vouchers, cat the joined category).
const categoryName = `COALESCE(cat.name, CASE WHEN v.category_id IS NULL THEN v.category END)`

// ---- checks of the documents a voucher or a campaign's template holds ----

// obj decodes a JSON object, or says at path that it is not one.
// maxNumber is the largest amount the API stores exactly (cents of a
// float64's integer range).
const maxNumber = 1 << 53

func number(m map[string]json.RawMessage, key, path string, required, integer bool, hi float64) error {
	raw, ok := m[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		if required {
			return apierr.InvalidPayload(path + "." + key + " is required")
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || raw[0] == '"' {
		return apierr.InvalidPayload(path + "." + key + " must be a number")
	}
	if integer && f != math.Trunc(f) {
		return apierr.InvalidPayload(path + "." + key + " must be a whole number")
	}
	if f < 0 || f > hi {
		return apierr.InvalidPayload(fmt.Sprintf("%s.%s must be from 0 to %s", path, key, strconv.FormatFloat(hi, 'f', -1, 64)))
	}
	return nil
}

func oneOf(m map[string]json.RawMessage, key, path string, required bool, allowed ...string) (string, error) {
	s, err := campaigns.String(m, key, path, required)
	if err != nil || s == nil {
		return "", err
	}
	for _, a := range allowed {
		if *s == a {
			return *s, nil
		}
	}
	return "", apierr.InvalidPayload(fmt.Sprintf("%s.%s must be one of %v; got %q", path, key, allowed, *s))
}

func boolean(m map[string]json.RawMessage, key, path string) error {
	raw, ok := m[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return apierr.InvalidPayload(path + "." + key + " must be true or false")
	}
	return nil
}

func product(m map[string]json.RawMessage, key, path string) error {
	raw, ok := m[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	p, err := campaigns.Object(raw, path+"."+key)
	if err != nil {
		return err
	}
	for _, k := range []string{"id", "source_id", "name"} {
		if _, err := campaigns.String(p, k, path+"."+key, false); err != nil {
			return err
		}
	}
	return nil
}

// CheckDiscount checks a discount object in one of the specification's
// five variants and returns it as given (stored and returned exactly).
func CheckDiscount(raw json.RawMessage, path string) (json.RawMessage, error) {
	m, err := campaigns.Object(raw, path)
	if err != nil {
		return nil, err
	}
	typ, err := oneOf(m, "type", path, true, "AMOUNT", "PERCENT", "UNIT", "FIXED")
	if err != nil {
		return nil, err
	}
	hasFormula := func(k string) bool { _, ok := m[k]; return ok }
	if err := boolean(m, "is_dynamic", path); err != nil {
		return nil, err
	}
	for _, k := range []string{"amount_off_formula", "percent_off_formula", "unit_off_formula", "fixed_amount_formula"} {
		if _, err := campaigns.String(m, k, path, false); err != nil {
			return nil, err
		}
	}
	switch typ {
	case "AMOUNT":
		if err := number(m, "amount_off", path, !hasFormula("amount_off_formula"), false, maxNumber); err != nil {
			return nil, err
		}
		if err := number(m, "aggregated_amount_limit", path, false, true, maxNumber); err != nil {
			return nil, err
		}
		if _, err := oneOf(m, "effect", path, false, "APPLY_TO_ORDER", "APPLY_TO_ITEMS", "APPLY_TO_ITEMS_PROPORTIONALLY",
			"APPLY_TO_ITEMS_PROPORTIONALLY_BY_QUANTITY", "APPLY_TO_ITEMS_BY_QUANTITY"); err != nil {
			return nil, err
		}
	case "PERCENT":
		if err := number(m, "percent_off", path, !hasFormula("percent_off_formula"), false, 100); err != nil {
			return nil, err
		}
		if err := number(m, "amount_limit", path, false, false, maxNumber); err != nil {
			return nil, err
		}
		if err := number(m, "aggregated_amount_limit", path, false, true, maxNumber); err != nil {
			return nil, err
		}
		if _, err := oneOf(m, "effect", path, false, "APPLY_TO_ORDER", "APPLY_TO_ITEMS"); err != nil {
			return nil, err
		}
	case "FIXED":
		if err := number(m, "fixed_amount", path, !hasFormula("fixed_amount_formula"), false, maxNumber); err != nil {
			return nil, err
		}
		if _, err := oneOf(m, "effect", path, false, "APPLY_TO_ORDER", "APPLY_TO_ITEMS"); err != nil {
			return nil, err
		}
	case "UNIT":
		effect, err := oneOf(m, "effect", path, false, "ADD_MISSING_ITEMS", "ADD_NEW_ITEMS", "ADD_MANY_ITEMS", "ADD_SAME_ITEMS")
		if err != nil {
			return nil, err
		}
		if effect == "ADD_MANY_ITEMS" {
			var units []json.RawMessage
			if raw, ok := m["units"]; !ok || json.Unmarshal(raw, &units) != nil || len(units) == 0 || len(units) > 100 {
				return nil, apierr.InvalidPayload(path + ".units must be an array of 1 to 100 units when effect is ADD_MANY_ITEMS")
			}
			for i, u := range units {
				up := fmt.Sprintf("%s.units[%d]", path, i)
				um, err := campaigns.Object(u, up)
				if err != nil {
					return nil, err
				}
				if _, err := campaigns.String(um, "unit_off_formula", up, false); err != nil {
					return nil, err
				}
				_, f := um["unit_off_formula"]
				if err := number(um, "unit_off", up, !f, false, maxNumber); err != nil {
					return nil, err
				}
				if _, err := campaigns.String(um, "unit_type", up, true); err != nil {
					return nil, err
				}
				if _, err := oneOf(um, "effect", up, true, "ADD_NEW_ITEMS", "ADD_MISSING_ITEMS"); err != nil {
					return nil, err
				}
				if err := product(um, "product", up); err != nil {
					return nil, err
				}
				if err := product(um, "sku", up); err != nil {
					return nil, err
				}
			}
			break
		}
		if _, ok := m["units"]; ok {
			return nil, apierr.InvalidPayload(path + ".units applies to effect ADD_MANY_ITEMS only")
		}
		if err := number(m, "unit_off", path, !hasFormula("unit_off_formula"), true, maxNumber); err != nil {
			return nil, err
		}
		if _, err := campaigns.String(m, "unit_type", path, true); err != nil {
			return nil, err
		}
		if err := product(m, "product", path); err != nil {
			return nil, err
		}
		if err := product(m, "sku", path); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// CheckGift reads gift: {amount, effect}; the balance starts at the amount.
func CheckGift(raw json.RawMessage, path string) (*GiftFigures, error) {
	m, err := campaigns.Object(raw, path)
	if err != nil {
		return nil, err
	}
	// No more than a balance may hold (maxCredits): a card made with more
	// could take no later change of its balance.
	if err := number(m, "amount", path, true, true, maxCredits); err != nil {
		return nil, err
	}
	var g GiftFigures
	_ = json.Unmarshal(m["amount"], &g.Amount)
	g.Balance = g.Amount
	e, err := oneOf(m, "effect", path, false, "APPLY_TO_ORDER", "APPLY_TO_ITEMS")
	if err != nil {
		return nil, err
	}
	if e != "" {
		g.Effect = &e
	}
	return &g, nil
}
