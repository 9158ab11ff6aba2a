-- Stackable redemptions (regional/engine): a parent redemption
-- (object_type 'redemption') and one child per redeemable (a voucher or a
-- promotion tier), each SUCCESS or FAILURE. The children of a failed
-- attempt are stored too, with the reason. view is the redemption as the
-- API answered it; the columns are what lists filter and counts read.
CREATE TABLE stacked_redemptions (
    project_id      TEXT        NOT NULL,
    id              TEXT        NOT NULL,
    parent_id       TEXT        NULL,
    object_type     TEXT        NOT NULL,
    object_id       TEXT        NULL,
    code            TEXT        NULL,
    campaign_id     TEXT        NULL,
    campaign_name   TEXT        NULL,
    customer_id     TEXT        NULL,
    order_id        TEXT        NULL,
    tracking_id     TEXT        NULL,
    result          TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    amount          INT8        NOT NULL DEFAULT 0,
    gift_amount     INT8        NOT NULL DEFAULT 0,
    failure_code    TEXT        NULL,
    session_key     TEXT        NULL,
    view            JSONB       NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX stacked_redemptions_by_parent ON stacked_redemptions (project_id, parent_id) {{hash_sharded}};
-- Redemption counts of validation rules: per object and customer, per campaign and day.
CREATE INDEX stacked_redemptions_by_object ON stacked_redemptions (project_id, object_id, customer_id);
CREATE INDEX stacked_redemptions_by_campaign ON stacked_redemptions (project_id, campaign_id, created_at) {{hash_sharded}};

-- A redemption is rolled back at most once.
CREATE TABLE stacked_rollbacks (
    project_id    TEXT        NOT NULL,
    id            TEXT        NOT NULL,
    redemption_id TEXT        NOT NULL,
    parent_id     TEXT        NULL,
    view          JSONB       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX stacked_rollbacks_once ON stacked_rollbacks (project_id, redemption_id);

-- LOCK sessions: a voucher's redemption reserved for a session until it
-- expires or is released (DELETE /v1/vouchers/{code}/sessions/{key}).
CREATE TABLE redemption_sessions (
    project_id  TEXT        NOT NULL,
    voucher_id  TEXT        NOT NULL,
    session_key TEXT        NOT NULL,
    customer_id TEXT        NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, voucher_id, session_key)
);
