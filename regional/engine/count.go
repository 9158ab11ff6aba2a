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
// shards (vouchers.QueueCountShard, queued onto b, which it sends) unless
// locked is set or another session holds one of them: then each is
// counted on its voucher's row (vouchers.CountLocked); all of them so, to
// keep the code order. A voucher whose shards are dry is counted on its
// row in the same transaction. It answers the batch the rest goes on.
func countVouchers(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, counted []*Candidate, locked bool,
	now time.Time) (*pgx.Batch, error) {
	sort.Slice(counted, func(i, j int) bool { return counted[i].voucher.Code < counted[j].voucher.Code })
	for _, c := range counted {
		locked = locked || c.held > 0
	}
	if len(counted) == 0 {
		return b, nil
	}
	dry := make([]bool, len(counted))
	if !locked {
		for i, c := range counted {
			if c.voucher.Quantity == nil {
				// No limit to keep: counted on its row, last, with no
				// shards (a grant to sixteen shards per fresh voucher
				// cost every redemption of distinct codes its p50).
				vouchers.QueueCount(b, projectID, c.voucher.ID, 1, 0, now)
				continue
			}
			vouchers.QueueCountShard(b, projectID, c.voucher.ID, &dry[i])
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	for i, c := range counted {
		if !locked && !dry[i] {
			continue
		}
		// Counted on the row: a later code's shard taken already would
		// break the code order, and the redemption runs again, counting
		// every one so.
		for _, d := range dry[i+1:] {
			if !locked && !d {
				return nil, vouchers.ErrShardDry
			}
		}
		if err := vouchers.CountLocked(ctx, tx, projectID, c.voucher.ID, c.held, now); err != nil {
			return nil, err
		}
	}
	return &pgx.Batch{}, nil
}
