DROP TABLE campaign_voucher_counts;
