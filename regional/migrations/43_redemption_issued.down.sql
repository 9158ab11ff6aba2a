ALTER TABLE redemptions DROP COLUMN issued;
