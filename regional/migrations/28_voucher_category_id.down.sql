ALTER TABLE vouchers DROP COLUMN category_id;
