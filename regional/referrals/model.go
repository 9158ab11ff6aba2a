package referrals

import (
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/vouchers"
)

// How a program converts a referee (conversion_event_type).
const (
	ViaRedemption  = "redemption"
	ViaCustomEvent = "custom_event"
)

// Reward types: points on a card of a loyalty program, or credits (cents)
// on a gift card of a gift campaign.
const (
	LoyaltyCard = "LOYALTY_CARD"
	GiftVoucher = "GIFT_VOUCHER"
)

// Referrer tier types: a reward for each referee, or for every N.
const (
	EachReferee    = "EACH_REFEREE"
	EveryNReferees = "EVERY_N_REFEREES"
)

// Holder roles.
const (
	Referrer = "REFERRER"
	Referee  = "REFEREE"
)

// Webhook event types, as the reference names them.
const (
	EventReferred         = "customer.referred"
	EventRewarded         = "customer.rewarded"
	EventRewardedPoints   = "customer.rewarded.loyalty_points"
	EventHolderAssigned   = "customer.holder.assignment.created"
	EventHolderUnassigned = "customer.holder.assignment.deleted"
	EventTierCreated      = "campaign.referral_tier.created"
	EventTierUpdated      = "campaign.referral_tier.updated"
	EventTierDeleted      = "campaign.referral_tier.deleted"
)

// Program is a campaign's referral_program: the reference's ReferralProgram
// and, as an extension, the referrer's rewards (referral_tiers).
type Program struct {
	ConversionEventType string       `json:"conversion_event_type"`
	CustomEvent         *CustomEvent `json:"custom_event,omitempty"`
	RefereeReward       *Reward      `json:"referee_reward,omitempty"`
	ReferralTiers       []Tier       `json:"referral_tiers,omitempty"`
}

// CustomEvent is the custom event that converts: its schema's id and name.
type CustomEvent struct {
	ID   *string `json:"id"`
	Name string  `json:"name"`
}

// Parent is the campaign a reward's points or credits come from.
type Parent struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Object string `json:"object"`
}

// Reward is a referee's or a tier's reward: Amount points (LOYALTY_CARD)
// or cents (GIFT_VOUCHER) on the rewarded customer's card of the parent.
type Reward struct {
	RelatedObjectParent Parent `json:"related_object_parent"`
	Type                string `json:"type"`
	Amount              int64  `json:"amount"`
}

// Tier is a reward of the referrer: for each referee, or for every
// Referees-th one, in the reference's referral tier shape.
type Tier struct {
	ID         string         `json:"id"`
	Banner     *string        `json:"banner"`
	Parameters TierParameters `json:"parameters"`
}

// TierParameters say when a tier rewards and with what.
type TierParameters struct {
	Type     string `json:"type"`
	Referees int64  `json:"referees"`
	Reward   Reward `json:"reward"`
	// Segment, when set, is the segment a referee must be in when they
	// convert to count towards the tier (interface-notes (b): tiers
	// "optionally requiring a segment").
	Segment *SegmentRef `json:"segment,omitempty"`
}

// SegmentRef names a customer segment.
type SegmentRef struct {
	ID string `json:"id"`
}

// due reports whether the tier rewards the referrer's n-th referee (of
// those it counts).
func (t Tier) due(n int64) bool {
	return t.Parameters.Type == EachReferee || n%t.Parameters.Referees == 0
}

// simple is the tier as webhooks show it (SimpleReferralTier).
func (t Tier) simple(campaignID string) map[string]any {
	return map[string]any{"id": t.ID, "campaign_id": campaignID, "banner": t.Banner, "parameters": t.Parameters}
}

// Holder is a row of referral_holders: a customer holding a referral code.
type Holder struct {
	ID         string
	VoucherID  string
	CampaignID string
	CustomerID string
	Role       string
	Metadata   map[string]any
	CreatedAt  time.Time
}

// HolderView is the reference's RedeemableHolder.
type HolderView struct {
	ID               string         `json:"id"`
	CreatedAt        jsonx.Time     `json:"created_at"`
	RedeemableID     string         `json:"redeemable_id"`
	RedeemableObject string         `json:"redeemable_object"`
	CampaignID       string         `json:"campaign_id"`
	CampaignType     string         `json:"campaign_type"`
	VoucherType      string         `json:"voucher_type"`
	CustomerID       string         `json:"customer_id"`
	HolderRole       string         `json:"holder_role"`
	Object           string         `json:"object"`
	Metadata         map[string]any `json:"metadata"`
}

// View renders h.
func (h Holder) View() HolderView {
	meta := h.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return HolderView{ID: h.ID, CreatedAt: jsonx.Time{Time: h.CreatedAt}, RedeemableID: h.VoucherID, RedeemableObject: "voucher",
		CampaignID: h.CampaignID, CampaignType: "REFERRAL_PROGRAM", VoucherType: vouchers.Discount, CustomerID: h.CustomerID,
		HolderRole: h.Role, Object: "redeemable_holder", Metadata: meta}
}

// simpleCampaign is the reference's SimpleCampaign of a referral program.
func simpleCampaign(c vouchers.Campaign) map[string]any {
	return map[string]any{"id": c.ID, "name": c.Name, "campaign_type": c.CampaignType, "type": c.Attrs.Type,
		"is_referral_code": true, "active": c.Attrs.Active, "referral_program": c.Attrs.ReferralProgram, "object": "campaign"}
}

// simpleVoucher is the reference's SimpleVoucher of a referral code.
func simpleVoucher(v vouchers.Voucher) map[string]any {
	return map[string]any{"id": v.ID, "code": v.Code, "type": v.Type, "campaign": v.CampaignName, "campaign_id": v.CampaignID,
		"is_referral_code": true, "holder_id": v.HolderID, "active": v.Active, "discount": json.RawMessage(orNull(v.Attrs.Discount)),
		"object": "voucher"}
}

func orNull(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	return raw
}
