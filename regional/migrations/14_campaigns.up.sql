-- One campaign model: loyalty programs and the other campaign types of the
-- interface (discount coupons, gift vouchers, promotions, referral
-- programs) share one table, told apart by campaign_type. Schema changes
-- only (CockroachDB refuses a schema change after a write in one
-- transaction); 15 adds what the other types need.
ALTER TABLE loyalty_campaigns RENAME TO campaigns;
