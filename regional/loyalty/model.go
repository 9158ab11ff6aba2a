package loyalty

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty/expiry"
	"github.com/tallyhq/tally/regional/tiers"
)

// Transaction types of the interface.
const (
	PendingPointsActivation = "PENDING_POINTS_ACTIVATION"
	PointsAccrual           = "POINTS_ACCRUAL"
	PointsRedemption        = "POINTS_REDEMPTION"
	PointsRefund            = "POINTS_REFUND"
	PointsAddition          = "POINTS_ADDITION"
	PointsRemoval           = "POINTS_REMOVAL"
	PointsExpiration        = "POINTS_EXPIRATION"
	PointsTransferIn        = "POINTS_TRANSFER_IN"
	PointsTransferOut       = "POINTS_TRANSFER_OUT"
)

// Webhook event types of the ledger.
const (
	EventTransactionCreated = "voucher.loyalty_card.transaction.created"
	EventPointsAdded        = "voucher.loyalty_card.points_added"
	EventVoucherPublished   = "voucher.published"
)

// CardConfig is the loyalty_card part of a campaign's voucher.
type CardConfig struct {
	Points          int64         `json:"points"`
	ExpirationRules *expiry.Rules `json:"expiration_rules,omitempty"`
}

// VoucherConfig is the template of a campaign's cards.
type VoucherConfig struct {
	Type           string         `json:"type"`
	LoyaltyCard    CardConfig     `json:"loyalty_card"`
	Redemption     map[string]any `json:"redemption"`
	CodeConfig     codes.Config   `json:"code_config"`
	IsReferralCode bool           `json:"is_referral_code"`
}

// Attrs are a loyalty program's properties.
type Attrs = campaigns.Attrs[VoucherConfig]

// Campaign is a loyalty program: a row of the one campaign model with the
// template of its cards.
type Campaign struct {
	campaigns.Campaign[VoucherConfig]
	// Tiers, by range, are read with a locked card (and by Transfer): the
	// balance changes that may move a holder between tiers.
	Tiers []tiers.Tier
	// tierEarning is what the campaign's tier events earn
	// (TierEarning.Column), read with a locked card: nil for none.
	tierEarning []byte
}

// CampaignView is the reference shape of a loyalty campaign.
type CampaignView = campaigns.View[VoucherConfig]

// View renders the campaign.
func (c Campaign) View() CampaignView { return c.ViewOf() }

// CardRef names a loyalty card the way a request does: in a project, by
// Member (the card's code, or else its id) and, when the path names one,
// Campaign (an id or name), the program the card must belong to.
type CardRef struct {
	Project, Campaign, Member string
}

// Card is a loyalty card and its figures.
type Card struct {
	ID                   string
	Code                 string
	CampaignID           string
	HolderID             *string
	Points               int64
	Balance              int64
	SubtractedPoints     int64
	ExpiredPoints        int64
	RedeemedPoints       int64
	PendingPoints        int64
	NextExpirationDate   *time.Time
	NextExpirationPoints *int64
	Metadata             map[string]any
	CreatedAt            time.Time
	UpdatedAt            *time.Time
}

// CardFigures is the simple loyalty card object.
type CardFigures struct {
	Points               int64   `json:"points"`
	Balance              int64   `json:"balance"`
	NextExpirationDate   *string `json:"next_expiration_date"`
	NextExpirationPoints *int64  `json:"next_expiration_points"`
	PendingPoints        int64   `json:"pending_points"`
	ExpiredPoints        int64   `json:"expired_points"`
	SubtractedPoints     int64   `json:"subtracted_points"`
}

// CardView is the reference shape of a loyalty card (a voucher).
type CardView struct {
	ID             string      `json:"id"`
	Code           string      `json:"code"`
	Campaign       string      `json:"campaign"`
	CampaignID     string      `json:"campaign_id"`
	Category       *string     `json:"category"`
	CategoryID     *string     `json:"category_id"`
	Categories     []any       `json:"categories"`
	Type           string      `json:"type"`
	Discount       any         `json:"discount,omitempty"` // not nullable in the reference
	Gift           any         `json:"gift"`
	LoyaltyCard    CardFigures `json:"loyalty_card"`
	StartDate      *jsonx.Time `json:"start_date"`
	ExpirationDate *jsonx.Time `json:"expiration_date"`
	// The reference types these as non-nullable objects and arrays, and strictly
	// typed clients reject a null: absent ones are left out, as in its examples.
	ValidityTimeframe any            `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek any            `json:"validity_day_of_week,omitempty"`
	ValidityHours     any            `json:"validity_hours,omitempty"`
	Active            bool           `json:"active"`
	AdditionalInfo    *string        `json:"additional_info"`
	Metadata          map[string]any `json:"metadata"`
	IsReferralCode    bool           `json:"is_referral_code"`
	HolderID          *string        `json:"holder_id"`
	Publish           map[string]any `json:"publish"`
	Redemption        map[string]any `json:"redemption"`
	CreatedAt         jsonx.Time     `json:"created_at"`
	UpdatedAt         *jsonx.Time    `json:"updated_at"`
	Object            string         `json:"object"`
}

// Figures returns the card's simple loyalty card object.
func (c Card) Figures() CardFigures {
	f := CardFigures{Points: c.Points, Balance: c.Balance, NextExpirationPoints: c.NextExpirationPoints,
		PendingPoints: c.PendingPoints, ExpiredPoints: c.ExpiredPoints, SubtractedPoints: c.SubtractedPoints}
	if c.NextExpirationDate != nil {
		d := c.NextExpirationDate.Format(time.DateOnly)
		f.NextExpirationDate = &d
	}
	return f
}

// View renders the card with its campaign.
func (c Card) View(camp Campaign) CardView {
	meta := c.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	published := 0
	if c.HolderID != nil {
		published = 1
	}
	return CardView{ID: c.ID, Code: c.Code, Campaign: camp.Name, CampaignID: c.CampaignID, Categories: []any{},
		Type: "LOYALTY_CARD", LoyaltyCard: c.Figures(), StartDate: jsonx.Ptr(camp.Attrs.StartDate),
		ExpirationDate: jsonx.Ptr(camp.Attrs.ExpirationDate), ValidityTimeframe: raw(camp.Attrs.ValidityTimeframe),
		ValidityDayOfWeek: raw(camp.Attrs.ValidityDayOfWeek), ValidityHours: raw(camp.Attrs.ValidityHours),
		Active: camp.Attrs.Active, Metadata: meta, IsReferralCode: false, HolderID: c.HolderID,
		Publish:    map[string]any{"object": "list", "count": published, "url": "/v1/vouchers/" + c.Code + "/publications?page=1&limit=10"},
		Redemption: map[string]any{"object": "list", "quantity": nil, "redeemed_quantity": 0, "redeemed_points": c.RedeemedPoints, "url": "/v1/vouchers/" + c.Code + "/redemptions?page=1&limit=10"},
		CreatedAt:  jsonx.Time{Time: c.CreatedAt}, UpdatedAt: jsonx.Ptr(c.UpdatedAt), Object: "voucher"}
}

func raw(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// simpleVoucher is the Simple voucher object of transfer details.
func (c Card) simpleVoucher(camp Campaign) map[string]any {
	return map[string]any{"id": c.ID, "code": c.Code, "type": "LOYALTY_CARD", "object": "voucher",
		"created_at": jsonx.Time{Time: c.CreatedAt}, "updated_at": jsonx.Ptr(c.UpdatedAt), "loyalty_card": c.Figures(),
		"campaign": camp.Name, "campaign_id": camp.ID, "is_referral_code": false, "holder_id": c.HolderID,
		"active": camp.Attrs.Active}
}

// Balance is the interface's balance object.
type Balance struct {
	Type          string        `json:"type"`
	Total         int64         `json:"total"`
	Object        string        `json:"object"`
	Points        int64         `json:"points"`
	Balance       int64         `json:"balance"`
	OperationType string        `json:"operation_type,omitempty"`
	RelatedObject RelatedObject `json:"related_object"`
}

// RelatedObject names the voucher a balance belongs to.
type RelatedObject struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

func (c Card) BalanceAfter(points int64) Balance {
	return Balance{Type: "loyalty_card", Total: c.Points - c.SubtractedPoints - c.ExpiredPoints, Object: "balance",
		Points: points, Balance: c.Balance, OperationType: "MANUAL", RelatedObject: RelatedObject{ID: c.ID, Type: "voucher"}}
}

// Transaction is a ledger entry.
type Transaction struct {
	ID                   string          `json:"id"`
	SourceID             *string         `json:"source_id"`
	VoucherID            string          `json:"voucher_id"`
	CampaignID           string          `json:"campaign_id"`
	Source               *string         `json:"source"`
	Reason               *string         `json:"reason"`
	Type                 string          `json:"type"`
	Details              json.RawMessage `json:"details"`
	RelatedTransactionID *string         `json:"related_transaction_id"`
	CreatedAt            jsonx.Time      `json:"created_at"`
	Delta                int64           `json:"-"` // the change of balance, stored, not shown
}

// MarshalJSON renders t as the interface does, an entry of no campaign (a
// gift card made on its own) with "campaign_id": null rather than "".
func (t Transaction) MarshalJSON() ([]byte, error) {
	type plain Transaction // without this method
	var campaignID *string
	if t.CampaignID != "" {
		campaignID = &t.CampaignID
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a reason reads back as written, as every answer (httpx.plainJSON)
	err := enc.Encode(struct {
		plain
		CampaignID *string `json:"campaign_id"` // the outer field wins over plain's
	}{plain(t), campaignID})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}
