-- What a CAMPAIGN reward's redemption gave (the voucher published, the gift
-- card credited or the other program's card given points, and how much),
-- so that its rollback takes back exactly that. NULL for other rewards.
ALTER TABLE redemptions ADD COLUMN issued JSONB NULL;
