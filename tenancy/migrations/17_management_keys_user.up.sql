-- A management key with a user_id acts for that project user (16), limited
-- to their projects and role. In a file of its own: its down is a DROP
-- COLUMN, which CockroachDB runs safely only alone in its transaction.
ALTER TABLE management_keys ADD COLUMN user_id TEXT NULL;
