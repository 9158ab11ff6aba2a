ALTER TABLE management_keys DROP COLUMN user_id;
