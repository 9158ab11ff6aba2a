package redemptions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
)

// A CAMPAIGN reward gives from another campaign what the member's points
// buy (interface-notes h7): a new voucher of a DISCOUNT_COUPONS campaign
// published to them, credits on their gift card of a GIFT_VOUCHERS
// campaign (published first if they hold none), or points on their card of
// another LOYALTY_PROGRAM (joined first if they hold none). It is given in
// the redemption's transaction, the two locked in code order (lockorder.go): the target's
// CREDITS_ADDITION or POINTS_ADDITION (details.reward and
// details.redemption) commits with the source's POINTS_REDEMPTION or not
// at all, and a rollback takes back exactly what issued records.

// issued is what a CAMPAIGN reward's redemption gave (the redemptions
// table's issued column).
type issued struct {
	Type      string `json:"type"`             // the campaign's type
	VoucherID string `json:"voucher_id"`       // the voucher given, the gift card credited or the card given points
	Amount    int64  `json:"amount,omitempty"` // credits or points added
}

// give gives CAMPAIGN reward w, bought by card as redemption id, to the
// card's holder in tx; the points go through l, the paying card's ledger
// write. It answers the voucher as the redemption shows it (reward.voucher)
// and what a rollback takes back.
func (s *Service) give(ctx context.Context, tx pgx.Tx, l *loyalty.LedgerWrite, projectID string, card loyalty.LockedCard, w rewards.Reward,
	id string, now time.Time) (any, issued, error) {
	c := w.Attrs.Parameters.Campaign
	if c == nil {
		return nil, issued{}, fmt.Errorf("redemptions: CAMPAIGN reward %s without its campaign", w.ID)
	}
	if card.HolderID == nil {
		return nil, issued{}, apierr.InvalidPayload(fmt.Sprintf("card %s is held by no customer: reward %s gives to the card's holder", card.Code, w.ID))
	}
	holder := *card.HolderID
	at := campaigns.HolderRef{Project: projectID, Campaign: c.ID, Customer: holder}
	details := map[string]any{"reward": map[string]any{"id": w.ID, "name": w.Name}, "redemption": map[string]any{"id": id},
		"source_voucher": map[string]any{"id": card.ID, "code": card.Code, "object": "voucher"}}
	switch c.Type {
	case rewards.DiscountCoupons:
		pub, fresh, err := s.pubs.PublishIn(ctx, tx, at)
		if err != nil {
			return nil, issued{}, err
		}
		if !fresh || len(pub.VouchersID) != 1 {
			return nil, issued{}, apierr.New(http.StatusBadRequest, "no_voucher_suitable_for_publication",
				"Couldn't find any voucher suitable for publication",
				fmt.Sprintf("Reward %s gives a new voucher of campaign %s, which is join_once, and customer %s holds one already.", w.ID, c.ID, holder))
		}
		return pub.Voucher, issued{Type: c.Type, VoucherID: pub.VouchersID[0]}, nil
	case rewards.GiftVouchers:
		v, found, err := s.vouchers.HeldGiftCard(ctx, tx, at)
		if err != nil {
			return nil, issued{}, err
		}
		if !found {
			pub, _, err := s.pubs.PublishIn(ctx, tx, at)
			if err != nil {
				return nil, issued{}, err
			}
			if len(pub.VouchersID) != 1 {
				return nil, issued{}, fmt.Errorf("redemptions: publication %s of campaign %s gave %d vouchers", pub.ID, c.ID, len(pub.VouchersID))
			}
			if v, err = s.vouchers.LockIn(ctx, tx, projectID, pub.VouchersID[0]); err != nil {
				return nil, issued{}, err
			}
		}
		if _, _, err := s.vouchers.CreditIn(ctx, tx, projectID, &v, *c.Balance, details); err != nil {
			return nil, issued{}, err
		}
		return v.View(), issued{Type: c.Type, VoucherID: v.ID, Amount: *c.Balance}, nil
	case rewards.LoyaltyProgram:
		if c.ID == card.CampaignID {
			return nil, issued{}, apierr.InvalidPayload(fmt.Sprintf(
				"reward %s gives points in loyalty program %s, the card's own: a CAMPAIGN reward adds points in another program", w.ID, c.ID))
		}
		pub, _, err := s.pubs.PublishIn(ctx, tx, at)
		if err != nil {
			return nil, issued{}, err
		}
		if len(pub.VouchersID) != 1 {
			return nil, issued{}, fmt.Errorf("redemptions: publication %s of program %s gave %d cards", pub.ID, c.ID, len(pub.VouchersID))
		}
		// Locked already when its code sorts before the paying card's
		// (lockBefore); locked here, after it, when it sorts after.
		target, err := s.prog.LockCard(ctx, sendIn(ctx, tx), loyalty.CardRef{Project: projectID, Member: pub.VouchersID[0]}, nil)
		if err != nil {
			return nil, issued{}, err
		}
		exp := target.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
		if _, _, err := l.Credit(ctx, &target, loyalty.PointsAddition, *c.Balance, exp, nil, details); err != nil {
			return nil, issued{}, err
		}
		return target.View(target.Campaign), issued{Type: c.Type, VoucherID: target.ID, Amount: *c.Balance}, nil
	}
	return nil, issued{}, fmt.Errorf("redemptions: CAMPAIGN reward %s of a %s campaign", w.ID, c.Type)
}

// takeBack undoes what a CAMPAIGN reward's redemption gave, in tx: the
// discount voucher disabled (voucher.disabled; one deleted since stays
// gone), the credits removed (CREDITS_REMOVAL) or the points removed
// (POINTS_REMOVAL) through l, refused when the member has spent them.
func (s *Service) takeBack(ctx context.Context, tx pgx.Tx, l *loyalty.LedgerWrite, projectID string, is issued, details map[string]any,
	now time.Time) error {
	switch is.Type {
	case rewards.DiscountCoupons:
		v, err := s.vouchers.LockIn(ctx, tx, projectID, is.VoucherID)
		if ae := (*apierr.Error)(nil); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		return s.vouchers.DisableIn(ctx, tx, projectID, v)
	case rewards.GiftVouchers:
		v, err := s.vouchers.LockIn(ctx, tx, projectID, is.VoucherID)
		if err != nil {
			return err
		}
		if _, _, err := s.vouchers.CreditIn(ctx, tx, projectID, &v, -is.Amount, details); err != nil {
			return err
		}
		return nil
	case rewards.LoyaltyProgram:
		var bs []loyalty.Bucket
		target, err := s.prog.LockCard(ctx, sendIn(ctx, tx), loyalty.CardRef{Project: projectID, Member: is.VoucherID}, &bs)
		if err != nil {
			return err
		}
		if target.Balance < is.Amount {
			return loyalty.PointsExceeded(target.Card, is.Amount)
		}
		if _, err := l.Take(&target.Card, loyalty.Subtracted, is.Amount, bs); err != nil {
			return err
		}
		return record(ctx, l, &target, loyalty.PointsRemoval, -is.Amount, nil, details, now)
	}
	return fmt.Errorf("redemptions: a rollback of what a %s campaign gave", is.Type)
}

// sendIn sends a batch in tx, as LockCard's send.
func sendIn(ctx context.Context, tx pgx.Tx) func(*pgx.Batch) error {
	return func(b *pgx.Batch) error { return tx.SendBatch(ctx, b).Close() }
}
