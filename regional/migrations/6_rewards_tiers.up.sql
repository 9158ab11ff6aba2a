-- Rewards, their assignment to loyalty programs, redemptions and their
-- rollbacks, and loyalty tiers (7 and 8 give the buckets their times for
-- the expiration list).
CREATE TABLE rewards (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    -- MATERIAL or COIN.
    type       TEXT        NOT NULL,
    -- parameters, attributes and metadata as the API shows them.
    attrs      JSONB       NOT NULL,
    -- NULL: unlimited. redeemed counts units taken while a stock is set.
    stock      INT8        NULL,
    redeemed   INT8        NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id),
    -- A redemption past the stock fails on this check.
    CONSTRAINT rewards_in_stock CHECK (stock IS NULL OR (stock >= 0 AND redeemed <= stock))
);

CREATE TABLE reward_assignments (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    reward_id   TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    -- The price in points; NULL for a COIN reward, priced by its ratio.
    points      INT8        NULL CHECK (points > 0),
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
-- A reward is assigned to a campaign once.
CREATE UNIQUE INDEX reward_assignments_by_campaign ON reward_assignments (project_id, campaign_id, reward_id);
CREATE INDEX reward_assignments_by_reward ON reward_assignments (project_id, reward_id);

CREATE TABLE redemptions (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    card_id     TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    reward_id   TEXT        NOT NULL,
    order_id    TEXT        NULL,
    points      INT8        NOT NULL CHECK (points > 0),
    -- SUCCEEDED, then ROLLED_BACK.
    status      TEXT        NOT NULL,
    -- The buckets the points were taken from: a rollback puts them back.
    taken       JSONB       NOT NULL,
    -- The redemption as the API showed it when it was made.
    view        JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX redemptions_by_card ON redemptions (project_id, card_id, id);
CREATE INDEX redemptions_by_reward ON redemptions (project_id, reward_id, status);
CREATE INDEX redemptions_by_order ON redemptions (project_id, order_id);

CREATE TABLE redemption_rollbacks (
    project_id    TEXT        NOT NULL,
    id            TEXT        NOT NULL,
    redemption_id TEXT        NOT NULL,
    view          JSONB       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
-- A redemption is rolled back at most once.
CREATE UNIQUE INDEX redemption_rollbacks_once ON redemption_rollbacks (project_id, redemption_id);

CREATE TABLE loyalty_tiers (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    points_from INT8        NOT NULL,
    -- NULL: no upper bound.
    points_to   INT8        NULL,
    -- earning_rules and rewards mappings and metadata as the API shows them.
    attrs       JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX loyalty_tiers_by_campaign ON loyalty_tiers (project_id, campaign_id, points_from);
