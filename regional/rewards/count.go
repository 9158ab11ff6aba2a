package rewards

import (
	"context"
	"math/rand/v2"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// A reward's redeemed counts its standing redemptions. Every redemption of
// a reward once updated the reward's row last before COMMIT and held that
// row's lock through the commit's WAL flush, so the buyers of one reward,
// stock or none, took turns on it: the discount-voucher CAMPAIGN reward's
// p95 queued there. Now only a reward with a stock takes the row's
// conditional update (rewards_in_stock refuses one past the stock), which
// must serialize its buyers to keep the stock exact. A reward without one
// is counted in reward_redemption_counts: each redemption or rollback adds
// ±1 to one of countShards rows, dealt in turn (nextShard), so buyers of
// one reward meet only when they are given the same shard, and a read
// adds the shards to the row's count (Columns).
//
// Which of the two a redemption takes is chosen under a lock, so that a
// stock set meanwhile sees every unit: QueueCount share-locks the row
// (FOR SHARE, which concurrent buyers share and which waits for no one
// but a writer of the row) only while the reward has no stock. Setting a
// stock (Update) locks the row for update, so it waits for the
// redemptions in flight that counted in shards to commit, and folds the
// shards into the row in its transaction; from then on buyers find the
// stock and take the row's update. A redemption that found a stock takes
// the row's update whatever the stock is by then, which is exact too.
const countShards = 16

// shardTurn deals this instance's shard additions to the shards in turn
// from a random start: each holds its row's lock to the commit, and the
// redemptions of one instance under way at once (fewer than countShards)
// each hold a shard of their own rather than meeting on one drawn at
// random (16 redeemers drawing from 16 shards nearly always pair two).
var shardTurn = func() *atomic.Uint32 {
	var t atomic.Uint32
	t.Store(rand.Uint32())
	return &t
}()

func nextShard() int16 { return int16(shardTurn.Add(1) % countShards) }

// shardsOf is the sum of the counter rows of the reward aliased w.
const shardsOf = `(SELECT COALESCE(sum(c.n), 0) FROM reward_redemption_counts c WHERE c.project_id = w.project_id AND c.reward_id = w.id)`

// Count is how a redemption or a rollback counts in a reward's redeemed:
// in a shard when the reward had no stock under the share lock that
// QueueCount took, else in the reward's row.
type Count struct {
	rewardID string
	shared   bool // the reward's row is share-locked and had no stock
}

// QueueCount queues onto b, in a transaction that counts a redemption of
// reward id or its rollback, the choice of how it counts (Count.Queue),
// share-locking the reward's row while it has no stock. It takes no lock
// of a reward with a stock, whose row the count then updates (a share lock
// before that update would deadlock two buyers).
func QueueCount(b *pgx.Batch, projectID, id string, c *Count) {
	c.rewardID = id
	b.Queue(`SELECT true FROM rewards WHERE project_id = $1 AND id = $2 AND stock IS NULL FOR SHARE`, projectID, id).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				c.shared = true
			}
			return rows.Err()
		})
}

// Queue queues onto b a change of the reward's count of standing
// redemptions by delta (+1 for a redemption, -1 for its rollback): one
// shard's upsert, or the row's update, which the rewards_in_stock check
// refuses past a stock (IsOutOfStock) and which never goes below 0. A
// reward deleted since is left alone: without its row there is no share
// lock, and the row's update finds nothing. The caller queues it last
// before COMMIT, and several in reward id order.
func (c Count) Queue(b *pgx.Batch, projectID string, delta int) {
	if c.shared {
		b.Queue(`INSERT INTO reward_redemption_counts (project_id, reward_id, shard, n) VALUES ($1, $2, $3, $4)
			ON CONFLICT (project_id, reward_id, shard) DO UPDATE SET n = reward_redemption_counts.n + excluded.n`,
			projectID, c.rewardID, nextShard(), delta)
		return
	}
	b.Queue(`UPDATE rewards SET redeemed = redeemed + $3 WHERE project_id = $1 AND id = $2 AND redeemed + $3 >= 0`,
		projectID, c.rewardID, delta)
}

// RewardID is the reward c counts in.
func (c Count) RewardID() string { return c.rewardID }

// foldCounts moves a reward's shards into its row, in the transaction that
// gives it a stock, after its row is locked for update: no redemption
// counting in a shard is in flight then (each holds the row's share lock
// to its commit), and none starts before this commits.
func foldCounts(ctx context.Context, tx db.Querier, projectID, id string) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE rewards w SET redeemed = redeemed + `+shardsOf+` WHERE w.project_id = $1 AND w.id = $2`, projectID, id)
	b.Queue(`DELETE FROM reward_redemption_counts WHERE project_id = $1 AND reward_id = $2`, projectID, id)
	return tx.SendBatch(ctx, b).Close()
}

// queueDropCounts queues onto b the deletion of a deleted reward's shards.
func queueDropCounts(b *pgx.Batch, projectID, id string) {
	b.Queue(`DELETE FROM reward_redemption_counts WHERE project_id = $1 AND reward_id = $2`, projectID, id)
}
