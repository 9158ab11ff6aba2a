-- The counts campaigns.vouchers_count held move to shard 0 of their
-- campaign's counter rows (34).
INSERT INTO campaign_voucher_counts (project_id, campaign_id, shard, n)
SELECT project_id, id, 0, vouchers_count FROM campaigns WHERE vouchers_count <> 0;
