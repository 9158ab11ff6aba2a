package vouchers

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
)

const maxVouchers = 1_000_000

// Template is the voucher a campaign makes.
type Template struct {
	Type       string          `json:"type"`
	Discount   json.RawMessage `json:"discount,omitempty"`
	Gift       *GiftFigures    `json:"gift,omitempty"`
	CodeConfig codes.Config    `json:"code_config"`
	Redemption struct {
		Quantity *int64 `json:"quantity"`
	} `json:"redemption"`
	IsReferralCode bool `json:"is_referral_code"`
}

// CampaignAttrs are a discount or gift campaign's properties kept as a
// document, in the shape loyalty programs keep theirs.
type CampaignAttrs = campaigns.Attrs[Template]

// Campaign is a discount, gift or referral campaign: a row of the one
// campaign model with this package's voucher template.
type Campaign = campaigns.Campaign[Template]

// voucher is a new voucher of the campaign, as its template says.
func (t Template) voucher(c Campaign, code string, now time.Time) Voucher {
	a := c.Attrs
	v := Voucher{Code: code, CampaignID: &c.ID, CampaignName: &c.Name, Type: t.Type, Active: true, Category: a.Category,
		CategoryID: a.CategoryID, Quantity: t.Redemption.Quantity, CreatedAt: now,
		Attrs: Attrs{Discount: t.Discount, StartDate: a.StartDate, ExpirationDate: a.ExpirationDate,
			ValidityTimeframe: a.ValidityTimeframe, ValidityDayOfWeek: a.ValidityDayOfWeek, ValidityHours: a.ValidityHours}}
	if t.Gift != nil {
		g := *t.Gift
		v.Attrs.Gift = &g
	}
	// A campaign that uses the voucher metadata schema (the reference's
	// use_voucher_metadata_schema) holds its vouchers' metadata: each
	// voucher carries a copy, as the schema checked it on the campaign.
	if a.UseVoucherMetadataSchema && len(a.Metadata) > 0 {
		v.Attrs.Metadata = maps.Clone(a.Metadata)
	}
	return v
}

// CheckGenerated refuses a campaign whose generated vouchers the
// project's voucher metadata schema would refuse (a required key they
// lack, say): 400 metadata_validation_failed naming the keys, checked
// before any is made, so that none is ever generated broken.
func (s *Service) CheckGenerated(ctx context.Context, projectID string, c Campaign) error {
	err := s.CheckMetadata(ctx, projectID, c.Attrs.Voucher.voucher(c, "", time.Time{}).Attrs.Metadata)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Key == "metadata_validation_failed" {
		e := *ae
		e.Details = "the campaign's vouchers would break the project's voucher metadata schema (give their metadata " +
			"as the campaign's, with use_voucher_metadata_schema true): " + ae.Details
		return &e
	}
	return err
}

// CampaignView is the reference's campaign shape, the one loyalty programs
// have, with this package's voucher template.
type CampaignView = campaigns.View[Template]

// CampaignTypes are the campaign types whose vouchers this package makes.
var CampaignTypes = []string{"DISCOUNT_COUPONS", "GIFT_VOUCHERS", "REFERRAL_PROGRAM"}

// Campaign finds a live campaign of this package's types by id or name in q
// (404 otherwise), row-locked with lock.
func (s *Service) Campaign(ctx context.Context, q db.Querier, projectID, idOrName string, lock bool) (Campaign, error) {
	c, err := campaigns.Get[Template](ctx, q, projectID, idOrName, lock, CampaignTypes...)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, apierr.NotFound("campaign", idOrName)
	}
	return c, err
}

// CampaignShared is CampaignIn share-locked (campaigns.GetShared): for
// writers that add vouchers to it, who take no turns on its row.
func (s *Service) CampaignShared(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := campaigns.GetShared[Template](ctx, q, projectID, idOrName, CampaignTypes...)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, apierr.NotFound("campaign", idOrName)
	}
	return c, err
}

// DropCampaignVouchers deletes a deleted campaign's vouchers for good,
// with their codes and ledger entries, 5,000 a transaction (a rerun after
// a crash deletes the rest): CAMPAIGN.VOUCHERS_DELETE's part for this
// package's campaigns. It answers how many it deleted.
func (s *Service) DropCampaignVouchers(ctx context.Context, projectID, campaignID string) (int64, error) {
	var deleted int64
	for {
		var n int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = dropVouchers(ctx, tx, projectID, campaignID, 5000)
			return err
		})
		if err != nil || n == 0 {
			return deleted, err
		}
		deleted += n
	}
}

// GiftCampaignID is the id of the GIFT_VOUCHERS campaign idOrName names,
// or its 404: the exports of a gift campaign's transactions (its cards'
// credits are in the ledger's table, as loyalty points are).
func (s *Service) GiftCampaignID(ctx context.Context, projectID, idOrName string) (string, error) {
	c, err := s.Campaign(ctx, s.pool, projectID, idOrName, false)
	if err != nil {
		return "", err
	}
	if c.CampaignType != "GIFT_VOUCHERS" {
		return "", apierr.NotFound("campaign", idOrName)
	}
	return c.ID, nil
}

// GiftCardID is the id of the gift card code names (its code or id), or
// its 404: the exports of a gift card's transactions.
func (s *Service) GiftCardID(ctx context.Context, projectID, code string) (string, error) {
	v, err := getVoucher(ctx, s.pool, projectID, code, false)
	if err != nil {
		return "", err
	}
	if v.Type != "GIFT_VOUCHER" {
		return "", apierr.NotFound("voucher", code)
	}
	return v.ID, nil
}
