DROP TABLE loyalty_pending_points;
DROP TABLE loyalty_accruals;
DROP TABLE earning_rules;
DROP TABLE orders;
