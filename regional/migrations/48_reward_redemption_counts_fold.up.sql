-- Nothing moves on the way up: every count is in rewards.redeemed until a
-- redemption adds to a counter row of 47. This version exists for its
-- down, which folds the counter rows back into rewards.redeemed before 47's
-- down drops them (a write and a schema change cannot share a file on
-- CockroachDB).
SELECT 1;
