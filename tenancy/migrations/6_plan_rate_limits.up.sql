-- Request limits of a plan's projects on the application API, per minute
-- and per hour; 0 is unlimited. 7 sets the plans' limits.
ALTER TABLE plans
    ADD COLUMN requests_per_minute INT8 NOT NULL DEFAULT 0,
    ADD COLUMN requests_per_hour INT8 NOT NULL DEFAULT 0;
