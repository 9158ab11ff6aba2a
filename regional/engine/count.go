package engine

import (
	"context"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/vouchers"
)

// countVouchers counts a redemption of each of its discount vouchers, in
// code order, after everything else the redemption writes but rewards'
// stock (docs/architecture.md, One hot code, Lock order 5a). On counter
// shards (vouchers.QueueCountShard), queued onto b, which goes with the
// COMMIT: a dry shard fails the transaction in the database
// (vouchers.ErrShardDry) and the redemption runs again counting on rows.
// A voucher without a quantity is counted on its row by one conditional
// update, queued so too (vouchers.QueueCount). When onRows is set or
// another session holds one of them, each is counted on its voucher's row
// (vouchers.CountLocked, whose read goes out with b and whose writes go
// with the next); all of them so, to keep the code order. It answers the
// batch the rest goes on.
func countVouchers(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, counted []*Candidate, onRows bool,
	now time.Time) (*pgx.Batch, error) {
	sort.Slice(counted, func(i, j int) bool { return counted[i].voucher.Code < counted[j].voucher.Code })
	for _, c := range counted {
		onRows = onRows || c.held > 0
	}
	if len(counted) == 0 {
		return b, nil
	}
	if !onRows {
		for _, c := range counted {
			if c.voucher.Quantity == nil {
				// No limit to keep: counted on its row, last, with no
				// shards (a grant to sixteen shards per fresh voucher
				// cost every redemption of distinct codes its p50).
				vouchers.QueueCount(b, projectID, c.voucher.ID, 1, 0, now)
				continue
			}
			vouchers.QueueCountShard(b, projectID, c.voucher.ID)
		}
		return b, nil
	}
	for _, c := range counted {
		var err error
		if b, err = vouchers.CountLocked(ctx, tx, b, projectID, c.voucher.ID, c.held, now); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// countsOnRow says a discount voucher with a quantity, as read before its
// redemption, is counted on its row rather than on a shard: nothing counted
// yet (shards are granted their quotas by a count on the row, so none has
// room) or this redemption takes its last use (a code of quantity 1 every
// time, whose shards are never granted any). On a shard, either would find
// it dry and run the whole redemption again.
func countsOnRow(v *vouchers.Voucher) bool {
	return v.Quantity != nil && (v.Redeemed <= 0 || *v.Quantity-v.Redeemed <= 1)
}
