DROP TABLE reward_redemption_counts;
