package loyalty

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/wallet"
)

// heldColumns are the wallet's fields on a card held by its holder_id (c
// the card, k its live campaign).
var heldColumns = wallet.Columns{ID: `'rh_' || substr(c.id, 3)`, CreatedAt: "c.created_at", RedeemableID: "c.id",
	Role: "'" + wallet.Owner + "'", CampaignID: "c.campaign_id", CampaignType: "k.campaign_type", VoucherType: "'LOYALTY_CARD'",
	Key: "c.id", Prefix: "v_"}

// Holdings is the wallet.Source of the loyalty cards a customer holds, in
// live programs. A card's status is its program's (active, dates), and
// NO_BALANCE without points.
func (s *Service) Holdings(ctx context.Context, projectID string, q wallet.Query) ([]wallet.Holding, int, error) {
	from := ` FROM loyalty_cards c` + campaigns.JoinLive("k", "c") + ` WHERE c.project_id = $1 AND c.holder_id = $2`
	filter, page, countArgs, pageArgs := q.SQL(heldColumns, []any{projectID, q.CustomerID})
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+from+filter, countArgs...).Scan(&total); err != nil {
		return nil, 0, err
	}
	held, err := db.Collect(func(r pgx.Row) (wallet.Holding, error) {
		var card Card
		var camp Campaign
		var meta, attrs []byte
		if err := r.Scan(append(cardDests(&card, &meta), campaigns.Dests(&camp.Campaign, &attrs)...)...); err != nil {
			return wallet.Holding{}, err
		}
		if meta != nil {
			if err := json.Unmarshal(meta, &card.Metadata); err != nil {
				return wallet.Holding{}, err
			}
		}
		var err error
		if camp.Attrs, err = s.attrs.parse(camp.ID, attrs); err != nil {
			return wallet.Holding{}, err
		}
		a := camp.Attrs
		st := wallet.State{Active: a.Active, Start: a.StartDate, Expiration: a.ExpirationDate, NoBalance: card.Balance <= 0}
		return wallet.Holding{ID: wallet.HoldingID(card.ID), CreatedAt: card.CreatedAt, RedeemableID: card.ID,
			CustomerID: q.CustomerID, Role: wallet.Owner, CampaignID: &card.CampaignID, CampaignType: &camp.CampaignType,
			VoucherType: "LOYALTY_CARD",
			Redeemable:  wallet.Redeemable{Type: "voucher", Voucher: card.View(camp), Status: st.Status(q.Now)}}, nil
	})(s.pool.Query(ctx, `SELECT `+cardColumnsC+`, `+campaignColumnsK+from+filter+page, pageArgs...))
	return held, total, err
}

// HeldCards are the ids of the cards customerID holds, in any program:
// what another owner's rows name a customer's cards by (reward
// redemptions, for a customer's erasure).
func HeldCards(ctx context.Context, q db.Querier, projectID, customerID string) ([]string, error) {
	return db.Collect(func(r pgx.Row) (string, error) {
		var id string
		return id, r.Scan(&id)
	})(q.Query(ctx, `SELECT id FROM loyalty_cards WHERE project_id = $1 AND holder_id = $2`, projectID, customerID))
}
