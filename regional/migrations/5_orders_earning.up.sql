-- Orders, earning rules, the accruals they made and pending points.
CREATE TABLE orders (
    project_id      TEXT        NOT NULL,
    id              TEXT        NOT NULL,
    source_id       TEXT        NULL,
    status          TEXT        NOT NULL,
    amount          INT8        NULL,
    initial_amount  INT8        NULL,
    discount_amount INT8        NULL,
    -- The items as the API shows them.
    items           JSONB       NOT NULL,
    metadata        JSONB       NULL,
    customer_id     TEXT        NULL,
    referrer_id     TEXT        NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NULL,
    paid_at         TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE UNIQUE INDEX orders_by_source ON orders (project_id, source_id);

CREATE TABLE earning_rules (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    -- The event that triggers the rule: order.paid or a custom event name.
    event       TEXT        NOT NULL,
    active      BOOL        NOT NULL,
    -- The rule as the API shows it, minus the columns above.
    attrs       JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX earning_rules_by_campaign ON earning_rules (project_id, campaign_id, id);

-- One row per order, earning rule and card that earned: the accrual task
-- writes it first, so a task run twice earns once.
CREATE TABLE loyalty_accruals (
    project_id TEXT        NOT NULL,
    order_id   TEXT        NOT NULL,
    rule_id    TEXT        NOT NULL,
    card_id    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, order_id, rule_id, card_id) {{hash_sharded}}
);

CREATE TABLE loyalty_pending_points (
    project_id   TEXT        NOT NULL,
    id           TEXT        NOT NULL,
    card_id      TEXT        NOT NULL,
    campaign_id  TEXT        NOT NULL,
    customer_id  TEXT        NOT NULL,
    order_id     TEXT        NOT NULL,
    points       INT8        NOT NULL CHECK (points > 0),
    activates_at DATE        NOT NULL,
    -- PENDING, then ACTIVATED or CANCELED.
    status       TEXT        NOT NULL,
    details      JSONB       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX loyalty_pending_points_by_card ON loyalty_pending_points (project_id, card_id, id);
CREATE INDEX loyalty_pending_points_by_campaign ON loyalty_pending_points (project_id, campaign_id, id);
-- The activation sweep's: what is still pending, by date.
CREATE INDEX loyalty_pending_points_due ON loyalty_pending_points (status, activates_at);
