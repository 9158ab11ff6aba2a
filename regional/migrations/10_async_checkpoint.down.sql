ALTER TABLE async_actions DROP COLUMN checkpoint;
