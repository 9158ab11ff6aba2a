ALTER TABLE plans DROP COLUMN requests_per_hour, DROP COLUMN requests_per_minute;
