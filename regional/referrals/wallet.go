package referrals

import (
	"context"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/wallet"
)

// heldColumns are the wallet's fields on a holder row: a referral code is
// a discount voucher of a REFERRAL_PROGRAM campaign.
var heldColumns = wallet.Columns{ID: "id", CreatedAt: "created_at", RedeemableID: "voucher_id", Role: "holder_role",
	CampaignID: "campaign_id", CampaignType: "'REFERRAL_PROGRAM'", VoucherType: "'DISCOUNT_VOUCHER'", Key: "id", Prefix: "rh_"}

// Holdings is the wallet.Source of the referral codes a customer holds,
// as their referrer or a referee: the holder rows the holders API lists,
// with the code as vouchers renders it. A holding whose code is gone (in
// the bin) is left out of the page.
func (s *Service) Holdings(ctx context.Context, projectID string, q wallet.Query) ([]wallet.Holding, int, error) {
	where := ` FROM referral_holders WHERE project_id = $1 AND customer_id = $2`
	filter, page, countArgs, pageArgs := q.SQL(heldColumns, []any{projectID, q.CustomerID})
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+where+filter, countArgs...).Scan(&total); err != nil {
		return nil, 0, err
	}
	hs, err := db.Collect(scanHolder)(s.pool.Query(ctx, `SELECT `+holderColumns+where+filter+page, pageArgs...))
	if err != nil || len(hs) == 0 {
		return nil, total, err
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.VoucherID
	}
	rs, err := s.vouchers.Redeemables(ctx, projectID, ids, q.Now)
	if err != nil {
		return nil, 0, err
	}
	out := make([]wallet.Holding, 0, len(hs))
	campaignType := "REFERRAL_PROGRAM"
	for _, h := range hs {
		r, ok := rs[h.VoucherID]
		if !ok {
			continue
		}
		out = append(out, wallet.Holding{ID: h.ID, CreatedAt: h.CreatedAt, RedeemableID: h.VoucherID, CustomerID: h.CustomerID,
			Role: h.Role, CampaignID: &h.CampaignID, CampaignType: &campaignType, VoucherType: "DISCOUNT_VOUCHER", Redeemable: r})
	}
	return out, total, nil
}
