-- Request limits of a plan's projects on the application API, per minute
-- and per hour; 0 is unlimited.
ALTER TABLE plans ADD COLUMN requests_per_minute INT8 NOT NULL DEFAULT 0;
ALTER TABLE plans ADD COLUMN requests_per_hour INT8 NOT NULL DEFAULT 0;
UPDATE plans SET requests_per_minute = 100, requests_per_hour = 1000 WHERE name = 'free';
UPDATE plans SET requests_per_minute = 2000, requests_per_hour = 100000 WHERE name = 'standard';

-- The quota of a project's window that router replicas have taken in
-- leases: used never passes the limit, and last_grant is what the latest
-- lease got (computed from the row before it).
CREATE TABLE rate_windows (
    project_id     TEXT        NOT NULL,
    window_seconds INT8        NOT NULL,
    window_start   TIMESTAMPTZ NOT NULL,
    used           INT8        NOT NULL,
    last_grant     INT8        NOT NULL,
    PRIMARY KEY (project_id, window_seconds, window_start)
);
CREATE INDEX rate_windows_by_start ON rate_windows (window_start);
