-- A stacked redemption's loyalty card paying with a reward: the card, the
-- reward, the points taken and the buckets they came from, so that a
-- rollback puts them back where they were. NULL for every other child.
ALTER TABLE stacked_redemptions ADD COLUMN card_payment JSONB;
