DROP INDEX loyalty_point_buckets_due;
ALTER TABLE loyalty_point_buckets DROP COLUMN updated_at;
ALTER TABLE loyalty_point_buckets DROP COLUMN created_at;
DROP TABLE loyalty_tiers;
DROP TABLE redemption_rollbacks;
DROP TABLE redemptions;
DROP TABLE reward_assignments;
DROP TABLE rewards;
