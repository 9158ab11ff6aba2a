package redemptions

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/rewards"
)

// A CAMPAIGN reward giving a new discount voucher (the discount reward of
// issue 38's figure, p95 ≤ 25 ms) is redeemed in as short a transaction as
// it can be:
//
//   - It skips the pipe. The pipe locks the card, reads the reward and
//     only then finds a CAMPAIGN reward, which it cannot give, and rolls
//     back: a round trip and a card lock for nothing. A reward seen giving
//     a new discount voucher is remembered (fresh, for freshTTL), and its
//     next redemptions begin with the transaction. Such a voucher is made
//     in the transaction, so nothing needs locking before the card
//     (lockorder.go locks a gift card or another program's card the
//     member holds before the paying card when its code sorts first). A
//     reward remembered so that has since been changed to give into a
//     held voucher or card is found out under the card's lock: that
//     transaction is refused (errNeedsTx) and run again in code order.
//   - The voucher it makes is counted last (campaigns.DeferVouchersCounts):
//     the campaign_voucher_counts row the count adds to is locked to the
//     commit, and counted where the voucher was made it was held through
//     the publication, the points' ledger and the redemption's writes, so
//     that concurrent redeemers drawing one shard queued on it; queued in
//     the last batch, beside the reward's own count, it is held only from
//     that batch to the commit, and the shard is dealt in turn
//     (campaigns.nextShard, rewards.nextShard), so the redeemers under way
//     at once in an instance hold different ones. In the lock order
//     (docs/architecture.md, Database rules) the count stays after the
//     vouchers and cards (3) and before the reward's stock (6); a
//     redemption for an order, locked with the card (5), counts where the
//     voucher is made, as before.

// freshTTL bounds how long a reward is remembered as giving a new
// discount voucher.
const freshTTL = time.Minute

// noteFresh remembers whether CAMPAIGN reward w gives a new discount
// voucher, and answers it.
func (s *Service) noteFresh(projectID string, w rewards.Reward) bool {
	c := w.Attrs.Parameters.Campaign
	fresh := c != nil && c.Type == rewards.DiscountCoupons
	if fresh {
		s.fresh.Add(projectID+"/"+w.ID, struct{}{})
	} else {
		s.fresh.Remove(projectID + "/" + w.ID)
	}
	return fresh
}

// givesFresh says whether reward id was last seen giving a new discount
// voucher.
func (s *Service) givesFresh(projectID, id string) bool {
	return s.fresh.Contains(projectID + "/" + id)
}

// redeemInTx redeems a CAMPAIGN reward in a transaction of its own, its
// vouchers' count queued last; begun without the pipe for a reward that
// turns out to need the lock order, once more in that order.
func (s *Service) redeemInTx(ctx context.Context, in *redeeming) error {
	err := s.campaignTx(ctx, in)
	if in.skipPipe && errors.Is(err, errNeedsTx) {
		in.skipPipe = false
		err = s.campaignTx(ctx, in)
	}
	return err
}

func (s *Service) campaignTx(ctx context.Context, in *redeeming) error {
	projectID := in.ref.Project
	return db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		ctx := ctx
		if in.order == nil {
			// One for each attempt. A redemption for an order locked it
			// with the card (lock order 5), so its count keeps its place
			// (4) where the voucher is made.
			ctx = campaigns.DeferVouchersCounts(ctx)
		}
		if in.gives != nil && in.holder != "" {
			t, err := heldTarget(ctx, tx, projectID, in.gives, in.holder)
			if err != nil {
				return err
			}
			if err := s.lockBefore(ctx, tx, projectID, t, in.payCode); err != nil {
				return err
			}
		}
		wr, err := s.redeemIn(ctx, func(b *pgx.Batch) error { return tx.SendBatch(ctx, b).Close() }, tx, in)
		if err != nil {
			return err
		}
		return tx.SendBatch(ctx, wr).Close()
	})
}
