package vouchers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
)

// GiftCardOf locks, in tx, the gift card of campaign at.Campaign (id or
// name) that at.Customer holds, the oldest of several; one who holds none is
// given a free one (ClaimFree), and claimed says so. It is how a reward of
// credits (regional/referrals) finds its card. A campaign that is not a
// live GIFT_VOUCHERS campaign is its 404.
func (s *Service) GiftCardOf(ctx context.Context, tx pgx.Tx, at campaigns.HolderRef) (v Voucher, claimed bool, err error) {
	c, err := campaigns.Get[Template](ctx, tx, at.Project, at.Campaign, false, "GIFT_VOUCHERS")
	if errors.Is(err, db.ErrNotFound) {
		return Voucher{}, false, apierr.NotFound("campaign", at.Campaign)
	}
	if err != nil {
		return Voucher{}, false, err
	}
	v, err = scanVoucher(tx.QueryRow(ctx, `SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.campaign_id = $2 AND v.holder_id = $3 AND v.bin_id IS NULL
		ORDER BY v.id LIMIT 1 FOR UPDATE OF v`, at.Project, c.ID, at.Customer))
	if !errors.Is(err, db.ErrNotFound) {
		return v, false, err
	}
	v, err = s.ClaimFree(ctx, tx, at.Project, c, at.Customer)
	if errors.Is(err, ErrNoFreeVoucher) {
		return Voucher{}, false, apierr.New(http.StatusBadRequest, "no_voucher_suitable_for_publication",
			"Couldn't find any voucher suitable for publication", fmt.Sprintf("Campaign %s has no free gift card left and is STATIC.", c.Name))
	}
	return v, err == nil, err
}
