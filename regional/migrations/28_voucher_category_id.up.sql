-- A voucher's category (27), by id.
ALTER TABLE vouchers ADD COLUMN category_id TEXT NULL;
