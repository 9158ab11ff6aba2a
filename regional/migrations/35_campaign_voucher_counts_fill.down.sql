-- The counter rows' sums back into campaigns.vouchers_count (36's down
-- added it again).
UPDATE campaigns SET vouchers_count = COALESCE((SELECT sum(vc.n) FROM campaign_voucher_counts vc
    WHERE vc.project_id = campaigns.project_id AND vc.campaign_id = campaigns.id), 0);
