-- vouchers_count is the campaign's counter rows now (34, 35).
ALTER TABLE campaigns DROP COLUMN vouchers_count;
