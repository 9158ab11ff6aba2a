-- A reward without a stock counts its standing redemptions in counter rows
-- (regional/rewards, Count): each redemption or rollback adds to one of 16
-- shards chosen at random under a share lock of the reward's row, so that
-- buyers of one reward no longer take turns on its row (an UPDATE of
-- rewards.redeemed held from the end of each redemption through its
-- commit's WAL flush). A reward's redeemed is its row's redeemed plus its
-- shards. A reward with a stock has no shards: its redemptions take the
-- row's conditional update (rewards_in_stock), and setting a stock folds
-- the shards into the row, after the share locks of the redemptions in
-- flight are released.
CREATE TABLE reward_redemption_counts (
    project_id TEXT NOT NULL,
    reward_id  TEXT NOT NULL,
    shard      INT2 NOT NULL,
    n          INT8 NOT NULL,
    PRIMARY KEY (project_id, reward_id, shard)
);
