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
