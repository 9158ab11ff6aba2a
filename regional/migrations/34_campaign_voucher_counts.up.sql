-- A campaign's vouchers_count as counter rows (regional/loyalty,
-- AddVouchersCount): every voucher a publication, an import, a single
-- create or a card join adds is counted by adding to one shard chosen at
-- random (an upsert), so writers of one campaign no longer take turns on
-- the campaign's row; a campaign read sums its shards (at most 16, one key
-- prefix). 35 moves the counts there, 36 drops campaigns.vouchers_count.
CREATE TABLE campaign_voucher_counts (
    project_id  TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    shard       INT2 NOT NULL,
    n           INT8 NOT NULL,
    PRIMARY KEY (project_id, campaign_id, shard)
);
