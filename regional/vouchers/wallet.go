package vouchers

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/wallet"
)

// heldColumns are the wallet's fields on a voucher held by its holder_id
// (v vouchers, c its campaign).
var heldColumns = wallet.Columns{ID: `'rh_' || substr(v.id, 3)`, CreatedAt: "v.created_at", RedeemableID: "v.id",
	Role: "'" + wallet.Owner + "'", CampaignID: "v.campaign_id", CampaignType: "c.campaign_type", VoucherType: "v.type",
	Key: "v.id", Prefix: "v_"}

// Holdings is the wallet.Source of the discount and gift vouchers a
// customer holds; referral codes are left to referrals' holders, which
// name their referrer and referees.
func (s *Service) Holdings(ctx context.Context, projectID string, q wallet.Query) ([]wallet.Holding, int, error) {
	where := ` WHERE v.project_id = $1 AND v.holder_id = $2 AND v.bin_id IS NULL AND c.deleted_at IS NULL
		AND (c.campaign_type IS NULL OR c.campaign_type <> 'REFERRAL_PROGRAM')`
	filter, page, countArgs, pageArgs := q.SQL(heldColumns, []any{projectID, q.CustomerID})
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+voucherFrom+where+filter, countArgs...).Scan(&total); err != nil {
		return nil, 0, err
	}
	vs, err := db.Collect(scanVoucher)(s.pool.Query(ctx, `SELECT `+voucherColumns+voucherFrom+where+filter+page, pageArgs...))
	if err != nil {
		return nil, 0, err
	}
	rs, err := s.redeemables(ctx, projectID, vs, q.Now)
	if err != nil {
		return nil, 0, err
	}
	out := make([]wallet.Holding, len(vs))
	for i, v := range vs {
		out[i] = wallet.Holding{ID: wallet.HoldingID(v.ID), CreatedAt: v.CreatedAt, RedeemableID: v.ID, CustomerID: q.CustomerID,
			Role: wallet.Owner, CampaignID: v.CampaignID, CampaignType: v.campaignType, VoucherType: v.Type, Redeemable: rs[i]}
	}
	return out, total, nil
}

// Redeemables are the vouchers with ids as a wallet shows them (their
// views and statuses at now), by id; those not found (deleted, in the bin)
// are left out.
func (s *Service) Redeemables(ctx context.Context, projectID string, ids []string, now time.Time) (map[string]wallet.Redeemable, error) {
	vs, err := db.Collect(scanVoucher)(s.pool.Query(ctx, `SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.id = ANY($2::TEXT[]) AND v.bin_id IS NULL AND c.deleted_at IS NULL`, projectID, ids))
	if err != nil {
		return nil, err
	}
	rs, err := s.redeemables(ctx, projectID, vs, now)
	out := make(map[string]wallet.Redeemable, len(vs))
	for i, v := range vs {
		out[v.ID] = rs[i]
	}
	return out, err
}

// redeemables renders vs (publish counts included) with their statuses.
// Their campaigns (live: the sources read no voucher of a deleted one)
// are read once each; a page names a few.
func (s *Service) redeemables(ctx context.Context, projectID string, vs []Voucher, now time.Time) ([]wallet.Redeemable, error) {
	views := make([]View, len(vs))
	for i, v := range vs {
		views[i] = v.View()
	}
	if err := s.counted(ctx, projectID, views); err != nil {
		return nil, err
	}
	// A voucher is usable when its campaign is too: the campaign's active
	// flag, and its dates where the voucher has none of its own.
	camps := map[string]campaigns.Campaign[json.RawMessage]{}
	for _, v := range vs {
		if v.CampaignID == nil {
			continue
		}
		if _, ok := camps[*v.CampaignID]; !ok {
			c, err := campaigns.Get[json.RawMessage](ctx, s.pool, projectID, *v.CampaignID, false)
			if err != nil {
				return nil, err
			}
			camps[*v.CampaignID] = c
		}
	}
	out := make([]wallet.Redeemable, len(vs))
	for i, v := range vs {
		st := v.state()
		if v.CampaignID != nil {
			a := camps[*v.CampaignID].Attrs
			st.Active = st.Active && a.Active
			st.Start, st.Expiration = cmp.Or(st.Start, a.StartDate), cmp.Or(st.Expiration, a.ExpirationDate)
		}
		out[i] = wallet.Redeemable{Type: "voucher", Voucher: views[i], Status: st.Status(now)}
	}
	return out, nil
}

// state is what the voucher's wallet status is computed from: a gift
// card's credits, not its redemption count, say whether it is spent.
func (v Voucher) state() wallet.State {
	st := wallet.State{Active: v.Active, Start: v.Attrs.StartDate, Expiration: v.Attrs.ExpirationDate,
		Used: v.Quantity != nil && v.Redeemed >= *v.Quantity}
	if v.Type == Gift {
		st.NoBalance = v.Attrs.Gift == nil || v.Attrs.Gift.Balance <= 0
	}
	return st
}
