ALTER TABLE stacked_redemptions DROP COLUMN card_payment;
