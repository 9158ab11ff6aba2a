-- One campaign model: loyalty programs and the other campaign types of the
-- interface (discount coupons, gift vouchers, promotions, referral
-- programs) share one table, told apart by campaign_type (21, indexed in
-- 22).
ALTER TABLE loyalty_campaigns RENAME TO campaigns;
