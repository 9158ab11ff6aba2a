-- One row per event and webhook: its id is the outbox task that delivers it,
-- and the webhook-id header receivers deduplicate by.
CREATE TABLE webhook_deliveries (
    project_id       TEXT        NOT NULL,
    id               TEXT        NOT NULL,
    webhook_id       TEXT        NOT NULL,
    event_id         TEXT        NOT NULL,
    event_type       TEXT        NOT NULL,
    target_url       TEXT        NOT NULL,
    status           TEXT        NOT NULL CHECK (status IN ('pending', 'delivered', 'canceled')),
    attempts         INT8        NOT NULL DEFAULT 0,
    last_status_code INT8        NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (project_id, webhook_id, id);

CREATE TABLE webhook_attempts (
    project_id  TEXT        NOT NULL,
    delivery_id TEXT        NOT NULL,
    attempt     INT8        NOT NULL,
    status_code INT8        NULL,
    error       TEXT        NULL,
    duration_ms INT8        NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, delivery_id, attempt)
);

-- API calls per project and day. Webhook sends are outbound and never
-- counted here.
CREATE TABLE api_usage (
    project_id TEXT NOT NULL,
    day        DATE NOT NULL,
    calls      INT8 NOT NULL,
    PRIMARY KEY (project_id, day)
);
