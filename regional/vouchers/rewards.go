package vouchers

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
)

// What a loyalty program's CAMPAIGN reward (regional/redemptions) asks of
// vouchers, in the redemption's transaction: the gift card a member holds
// in a gift campaign and its credits, and the disabling of a discount
// voucher the reward gave when the redemption is rolled back.

// HeldGiftCard locks and reads the gift card at names in tx (the holder's
// first), found false when they hold none.
func (s *Service) HeldGiftCard(ctx context.Context, tx pgx.Tx, at campaigns.HolderRef) (v Voucher, found bool, err error) {
	v, err = scanVoucher(tx.QueryRow(ctx, `SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.campaign_id = $2 AND v.holder_id = $3 AND v.bin_id IS NULL AND v.type = $4
		ORDER BY v.id LIMIT 1 FOR UPDATE OF v`, at.Project, at.Campaign, at.Customer, Gift))
	if errors.Is(err, db.ErrNotFound) {
		return Voucher{}, false, nil
	}
	return v, err == nil, err
}

// LockIn locks and reads the voucher with code or id in tx (404 when it is
// gone or in the bin).
func (s *Service) LockIn(ctx context.Context, tx pgx.Tx, projectID, codeOrID string) (Voucher, error) {
	return getVoucher(ctx, tx, projectID, codeOrID, true)
}

// CreditIn changes locked gift card v's credits by amt in tx (positive:
// CREDITS_ADDITION, negative: CREDITS_REMOVAL, refused past its balance),
// the entry's details holding details beside its balance; v is changed in
// place.
func (s *Service) CreditIn(ctx context.Context, tx pgx.Tx, projectID string, v *Voucher, amt int64, details map[string]any) (Balance, loyalty.Transaction, error) {
	w := &pgx.Batch{}
	bal, t, err := s.queueCredit(ctx, w, projectID, v, amt, nil, nil, details)
	if err != nil {
		return bal, t, err
	}
	return bal, t, tx.SendBatch(ctx, w).Close()
}

// DisableIn disables locked voucher v in tx (voucher.disabled), as a
// rolled back reward's discount voucher is.
func (s *Service) DisableIn(ctx context.Context, tx pgx.Tx, projectID string, v Voucher) error {
	now := s.now()
	v.Active, v.UpdatedAt = false, &now
	if err := updateVoucher(ctx, tx, projectID, v); err != nil {
		return err
	}
	return s.queueNotice(ctx, tx, &pgx.Batch{}, projectID, EventVoucherDisabled, v)
}

// HeldGiftCardKey is the id and code HeldGiftCard would lock, read without
// a lock ("" for none): where a transaction that locks it beside a loyalty
// card finds which to take first (docs/architecture.md, Lock order).
func HeldGiftCardKey(ctx context.Context, q db.Querier, at campaigns.HolderRef) (id, code string, err error) {
	err = q.QueryRow(ctx, `SELECT v.id, v.code FROM vouchers v
		WHERE v.project_id = $1 AND v.campaign_id = $2 AND v.holder_id = $3 AND v.bin_id IS NULL AND v.type = $4
		ORDER BY v.id LIMIT 1`, at.Project, at.Campaign, at.Customer, Gift).Scan(&id, &code)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", nil
	}
	return id, code, err
}
