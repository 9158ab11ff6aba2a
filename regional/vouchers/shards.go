package vouchers

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// A discount voucher's redemption count is escrowed over counter rows,
// voucher_count_shards (52; docs/architecture.md, One hot code): each
// shard holds a quota, granted under the voucher's row lock, and the
// redemptions counted against it. A redemption adds one to a shard with
// room (QueueCountShard), a short update of a row other redeemers of the
// code mostly do not write, and only when its shard is dry takes the
// voucher's row (CountLocked), which counts it there and grants the shard
// more. Exactness: the voucher's own count plus the shards' quotas (plus
// the other sessions' holds, for a redemption) never passes its quantity,
// since quotas grow only under the voucher's lock and within what is left;
// a shard never counts past its quota. The voucher's redeemed_quantity is
// its own count plus the shards' used (redeemedColumn).

// Shards is how many counter rows a voucher's count is spread over: a
// redeemer picks one at random, so 64 at once mostly write apart.
const Shards = 16

// maxGrant bounds a shard's grant: a dry shard sends its next redeemer
// through the voucher's row, one in maxGrant at most.
const maxGrant = 1000

// redeemedColumn is a voucher's redeemed_quantity as read (v is vouchers):
// its row's count and its shards'.
const redeemedColumn = `v.redeemed_quantity + CAST(COALESCE((SELECT sum(vs.used) FROM voucher_count_shards vs
	WHERE vs.project_id = v.project_id AND vs.voucher_id = v.id), 0) AS INT8)`

// ErrShardDry ends a redemption whose shard count found no shard with
// room (QueueCountShard): it rolls back and counts again with CountLocked,
// which grants more or finds the quantity reached.
var ErrShardDry = errors.New("vouchers: counter shard has no quota left")

// QueueCountShard counts one redemption of discount voucher id on a shard
// with room: the first from a random one on that no one holds (SKIP
// LOCKED), else the first from there, waited for. One conditional update
// of that shard's row, which it holds to the commit (docs/architecture.md,
// Lock order, 5a). It is for redemptions no other session holds the
// voucher for (their holds are checked under the voucher's lock,
// CountLocked). When no shard has room the database fails the statement
// (db.QueueChange), so a COMMIT in its batch commits nothing: ErrShardDry.
func QueueCountShard(b *pgx.Batch, projectID, id string) {
	db.QueueChange(b, ErrShardDry, `UPDATE voucher_count_shards SET used = used + 1
		WHERE project_id = $1 AND voucher_id = $2 AND used < quota AND shard = COALESCE(
			(SELECT s.shard FROM voucher_count_shards s WHERE s.project_id = $1 AND s.voucher_id = $2 AND s.used < s.quota
				ORDER BY (s.shard + $4 - $3) % $4 LIMIT 1 FOR UPDATE SKIP LOCKED),
			(SELECT s.shard FROM voucher_count_shards s WHERE s.project_id = $1 AND s.voucher_id = $2 AND s.used < s.quota
				ORDER BY (s.shard + $4 - $3) % $4 LIMIT 1))`,
		projectID, id, rand.Int64N(Shards), int64(Shards))
}

// CountLocked counts one redemption of discount voucher id on the
// voucher's row, under its lock, within its quantity less the shards'
// quotas and held (the other sessions' reservations, read earlier in the
// transaction); when that leaves no room, the shards' unused quotas are
// taken back first (each shard's row waited for). It then grants a shard
// a share of what is left, so that the next redeemers count on shards. A
// refusal answers ErrQuantityExceeded: the transaction must roll back.
// Called in place of QueueCountShard, last but for rewards' stock: its read
// goes out with b, the caller's writes before it, and it answers the batch
// of its own writes unsent, for the caller's next (or its COMMIT's).
func CountLocked(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID, id string, held int64, now time.Time) (*pgx.Batch, error) {
	var quantity *int64
	var own, quota, used int64
	b.Queue(`SELECT redemption_quantity, redeemed_quantity FROM vouchers WHERE project_id = $1 AND id = $2 FOR UPDATE`,
		projectID, id).QueryRow(func(r pgx.Row) error { return r.Scan(&quantity, &own) })
	queueShardSums(b, projectID, id, &quota, &used)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	left := func() int64 { return *quantity - own - quota - held - 1 }
	if quantity != nil && left() < 0 && quota > used {
		// Shards hold quota they have not used: take it back.
		b := &pgx.Batch{}
		b.Queue(`UPDATE voucher_count_shards SET quota = used WHERE project_id = $1 AND voucher_id = $2 AND quota > used`, projectID, id)
		queueShardSums(b, projectID, id, &quota, &used)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	// A grant to every dry shard, together at most half of what is left;
	// the last few go to one shard.
	// A voucher with no quantity has no limit to share out: it is
	// counted on its row alone, with no shards.
	grant, every := int64(0), true
	if quantity != nil {
		if left() < 0 {
			return nil, ErrQuantityExceeded
		}
		grant = min(maxGrant, left()/(2*Shards))
		if grant == 0 {
			grant, every = left(), false
		}
	}
	b = &pgx.Batch{}
	b.Queue(`UPDATE vouchers SET redeemed_quantity = redeemed_quantity + 1, updated_at = $3 WHERE project_id = $1 AND id = $2`,
		projectID, id, now)
	switch {
	case grant > 0 && every:
		// Shards in flight show their room to this statement and are
		// passed over without a wait.
		b.Queue(`INSERT INTO voucher_count_shards (project_id, voucher_id, shard, quota, used)
			SELECT $1, $2, s, 0, 0 FROM generate_series(0, $3) AS s ON CONFLICT (project_id, voucher_id, shard) DO NOTHING`,
			projectID, id, int64(Shards-1))
		b.Queue(`UPDATE voucher_count_shards SET quota = quota + $3 WHERE project_id = $1 AND voucher_id = $2 AND used >= quota`,
			projectID, id, grant)
	case grant > 0:
		b.Queue(`INSERT INTO voucher_count_shards (project_id, voucher_id, shard, quota, used) VALUES ($1, $2, $3, $4, 0)
			ON CONFLICT (project_id, voucher_id, shard) DO UPDATE SET quota = voucher_count_shards.quota + excluded.quota`,
			projectID, id, rand.Int64N(Shards), grant)
	}
	return b, nil
}

// queueShardSums reads the quotas and the counts of voucher id's shards.
func queueShardSums(b *pgx.Batch, projectID, id string, quota, used *int64) {
	b.Queue(`SELECT CAST(COALESCE(sum(quota), 0) AS INT8), CAST(COALESCE(sum(used), 0) AS INT8) FROM voucher_count_shards
		WHERE project_id = $1 AND voucher_id = $2`, projectID, id).QueryRow(func(r pgx.Row) error { return r.Scan(quota, used) })
}

// queueTakeBackQuotas ends voucher id's shards' grants at what they have
// counted, for a change of its quantity: the caller holds the voucher's
// row, so no grant is made meanwhile, and the next redemptions are
// granted within the new quantity.
func queueTakeBackQuotas(b *pgx.Batch, projectID, id string) {
	b.Queue(`UPDATE voucher_count_shards SET quota = used WHERE project_id = $1 AND voucher_id = $2 AND quota > used`, projectID, id)
}
