// Package publications gives vouchers of discount and gift campaigns to
// customers (POST /v1/publications, the legacy GET /v1/publications/create)
// and lists what was given (GET /v1/publications). It owns the
// publications table; the voucher's holder is set through regional/vouchers
// and the customer upserted through regional/customers, all in one
// transaction with the publication's webhook notices. Handlers answer the
// publication of the newest API version; requests of versions before
// v2017-04-20 get the bare voucher through internal/apiversion.
package publications

import (
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Results of a publication.
const (
	Success = "SUCCESS"
	Failure = "FAILURE"
)

// Webhook event types of publications, as the reference names them.
const (
	EventSucceeded         = "publication.succeeded"
	EventFailed            = "publication.failed"
	EventCustomerSucceeded = "customer.publication.succeeded"
	EventCustomerFailed    = "customer.publication.failed"
)

// Publication is a row of publications.
type Publication struct {
	ID             string
	CampaignID     *string
	CampaignName   *string
	VoucherID      *string
	VoucherCode    *string
	VoucherType    *string
	IsReferralCode bool
	CustomerID     string
	TrackingID     *string
	Channel        string
	SourceID       *string
	Result         string
	FailureCode    *string
	FailureMessage *string
	Metadata       map[string]any
	JoinOnce       *string
	CreatedAt      time.Time
}

// View is the reference's publication (PublicationsCreateResponseBody, and
// the list's items): voucher is the full voucher on creation, the list's
// simplified voucher in a list; a publication of several vouchers
// (campaign.count above 1) has vouchers (their codes) and no voucher.
type View struct {
	ID             string         `json:"id"`
	Object         string         `json:"object"`
	CreatedAt      jsonx.Time     `json:"created_at"`
	CustomerID     string         `json:"customer_id"`
	TrackingID     *string        `json:"tracking_id"`
	Metadata       map[string]any `json:"metadata"`
	Channel        string         `json:"channel"`
	SourceID       *string        `json:"source_id"`
	Result         string         `json:"result"`
	FailureCode    *string        `json:"failure_code,omitempty"`
	FailureMessage *string        `json:"failure_message,omitempty"`
	Customer       map[string]any `json:"customer"`
	VouchersID     []string       `json:"vouchers_id"`
	Vouchers       *[]string      `json:"vouchers,omitempty"`
	Voucher        any            `json:"voucher,omitempty"`
	// again: an earlier publication answered again (join_once, source_id).
	again bool
}

// ListVoucher is the simplified voucher of a list's publication.
type ListVoucher struct {
	Code           string                `json:"code"`
	Object         string                `json:"object"`
	Campaign       *string               `json:"campaign"`
	Gift           *vouchers.GiftFigures `json:"gift,omitempty"`
	LoyaltyCard    *loyalty.CardFigures  `json:"loyalty_card"`
	Discount       json.RawMessage       `json:"discount,omitempty"`
	IsReferralCode bool                  `json:"is_referral_code"`
}

// view renders p with its customer (nil: named by its ids only).
func (p Publication) view(c *customers.Customer) View {
	meta := p.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	v := View{ID: p.ID, Object: "publication", CreatedAt: jsonx.Time{Time: p.CreatedAt}, CustomerID: p.CustomerID,
		TrackingID: p.TrackingID, Metadata: meta, Channel: p.Channel, SourceID: p.SourceID, Result: p.Result,
		FailureCode: p.FailureCode, FailureMessage: p.FailureMessage, VouchersID: []string{}}
	if c != nil {
		v.Customer = c.Simple()
	} else {
		v.Customer = map[string]any{"id": p.CustomerID, "source_id": p.TrackingID, "object": "customer"}
	}
	if p.VoucherID != nil {
		v.VouchersID = []string{*p.VoucherID}
	}
	if p.Result == Failure {
		v.Vouchers = &[]string{} // the reference's failed item requires the (empty) list
	}
	return v
}

// given is a voucher of a publication of several.
type given struct{ ID, Code string }

// several sets the answer of a publication of several vouchers: their ids
// and codes, and no one voucher.
func (v *View) several(gs []given) {
	ids, codes := make([]string, len(gs)), make([]string, len(gs))
	for i, g := range gs {
		ids[i], codes[i] = g.ID, g.Code
	}
	v.VouchersID, v.Vouchers, v.Voucher = ids, &codes, nil
}

func listVoucher(v vouchers.Voucher, referral bool) ListVoucher {
	return ListVoucher{Code: v.Code, Object: "voucher", Campaign: v.CampaignName, Gift: v.Attrs.Gift,
		Discount: v.Attrs.Discount, IsReferralCode: referral}
}
