DROP TABLE rate_windows;
ALTER TABLE plans DROP COLUMN requests_per_hour;
ALTER TABLE plans DROP COLUMN requests_per_minute;
