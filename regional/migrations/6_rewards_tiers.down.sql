DROP TABLE loyalty_tiers;
DROP TABLE redemption_rollbacks;
DROP TABLE redemptions;
DROP TABLE reward_assignments;
DROP TABLE rewards;
