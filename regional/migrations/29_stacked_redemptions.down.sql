DROP TABLE redemption_sessions;
DROP TABLE stacked_rollbacks;
DROP TABLE stacked_redemptions;
