-- A discount voucher's redemption count as escrow shards (regional/vouchers,
-- shards.go; docs/architecture.md, One hot code): each row holds a quota,
-- a share of the voucher's redemption.quantity granted under the voucher's
-- row lock, and the redemptions counted against it (used <= quota). A
-- redeemer adds one to a shard with room in one short conditional update,
-- so the redeemers of one public code write different rows; the voucher's
-- redeemed_quantity is its row's count plus the shards' used, and its own
-- count plus the shards' quotas never pass the quantity. Hash-sharded on
-- CockroachDB, so that one voucher's shards are not one range's.
CREATE TABLE voucher_count_shards (
    project_id TEXT NOT NULL,
    voucher_id TEXT NOT NULL,
    shard      INT8 NOT NULL,
    quota      INT8 NOT NULL,
    used       INT8 NOT NULL DEFAULT 0,
    PRIMARY KEY (project_id, voucher_id, shard) {{hash_sharded}}
);
