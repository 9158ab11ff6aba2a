DROP TABLE project_brandings;
ALTER TABLE management_keys DROP COLUMN user_id;
DROP TABLE project_users;
DROP TABLE users;
