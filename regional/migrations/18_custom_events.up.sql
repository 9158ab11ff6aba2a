-- Custom events as POST /v1/events stored them. answer is the response as
-- first sent, which a retry with the same Idempotency-Key gets again;
-- request_hash tells a retry from another request reusing the key.
CREATE TABLE custom_events (
    project_id      TEXT        NOT NULL,
    id              TEXT        NOT NULL,
    type            TEXT        NOT NULL,
    customer_id     TEXT        NOT NULL,
    schema_id       TEXT        NOT NULL,
    schema_name     TEXT        NOT NULL,
    loyalty_code    TEXT        NULL,
    referral        JSONB       NULL,
    metadata        JSONB       NOT NULL,
    answer          BYTEA       NOT NULL, -- the bytes sent, sent again as they were
    idempotency_key TEXT        NULL,
    request_hash    TEXT        NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX custom_events_by_customer ON custom_events (project_id, customer_id);
CREATE UNIQUE INDEX custom_events_by_idempotency_key ON custom_events (project_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- A customer's activity (GET /v1/customers/{id}/activity), newest by id.
CREATE TABLE customer_activities (
    project_id  TEXT        NOT NULL,
    customer_id TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    type        TEXT        NOT NULL,
    data        JSONB       NOT NULL,
    group_id    TEXT        NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, customer_id, id)
);

-- One accrual per (event, rule, card), whatever happens to the task.
CREATE TABLE custom_event_accruals (
    project_id TEXT        NOT NULL,
    event_id   TEXT        NOT NULL,
    rule_id    TEXT        NOT NULL,
    card_id    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, event_id, rule_id, card_id) {{hash_sharded}}
);
CREATE INDEX earning_rules_by_event ON earning_rules (project_id, event, campaign_id);
