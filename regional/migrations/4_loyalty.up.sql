-- Loyalty programs, their cards and the points ledger.
CREATE TABLE loyalty_campaigns (
    project_id        TEXT        NOT NULL,
    id                TEXT        NOT NULL,
    name              TEXT        NOT NULL,
    -- The campaign as the API shows it, minus the columns below.
    attrs             JSONB       NOT NULL,
    vouchers_count    INT8        NOT NULL DEFAULT 0,
    generation_status TEXT        NOT NULL,
    deleted_at        TIMESTAMPTZ NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
-- Names are unique among a project's live campaigns; a deleted campaign's
-- name is renamed away when it is deleted.
CREATE UNIQUE INDEX loyalty_campaigns_by_name ON loyalty_campaigns (project_id, name);

-- A loyalty card (a voucher of type LOYALTY_CARD). Its figures are kept in
-- the transaction that writes each ledger entry: balance = points -
-- subtracted_points - expired_points - redeemed_points, and balance is the
-- sum of the card's transactions.
CREATE TABLE loyalty_cards (
    project_id        TEXT        NOT NULL,
    id                TEXT        NOT NULL,
    code              TEXT        NOT NULL,
    campaign_id       TEXT        NOT NULL,
    holder_id         TEXT        NULL,
    points            INT8        NOT NULL DEFAULT 0,
    balance           INT8        NOT NULL DEFAULT 0 CHECK (balance >= 0),
    subtracted_points INT8        NOT NULL DEFAULT 0,
    expired_points    INT8        NOT NULL DEFAULT 0,
    redeemed_points   INT8        NOT NULL DEFAULT 0,
    pending_points    INT8        NOT NULL DEFAULT 0,
    next_expiration_date   DATE   NULL,
    next_expiration_points INT8   NULL,
    metadata          JSONB       NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
-- Codes are unique within a project, across its campaigns.
CREATE UNIQUE INDEX loyalty_cards_by_code ON loyalty_cards (project_id, code);
CREATE INDEX loyalty_cards_by_campaign ON loyalty_cards (project_id, campaign_id, id) {{hash_sharded}};
CREATE INDEX loyalty_cards_by_holder ON loyalty_cards (project_id, holder_id, campaign_id);

-- Points on a card by expiration date: additions make buckets, removals
-- take from the soonest-expiring first. A card's buckets sum to its balance.
CREATE TABLE loyalty_point_buckets (
    project_id TEXT   NOT NULL,
    card_id    TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    points     INT8   NOT NULL CHECK (points >= 0),
    expires_on DATE   NULL,
    PRIMARY KEY (project_id, card_id, id)
);

-- The ledger. delta is the signed change to the card's balance.
CREATE TABLE loyalty_transactions (
    project_id             TEXT        NOT NULL,
    id                     TEXT        NOT NULL,
    card_id                TEXT        NOT NULL,
    campaign_id            TEXT        NOT NULL,
    type                   TEXT        NOT NULL,
    delta                  INT8        NOT NULL,
    source_id              TEXT        NULL,
    source                 TEXT        NULL,
    reason                 TEXT        NULL,
    details                JSONB       NOT NULL,
    related_transaction_id TEXT        NULL,
    created_at             TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX loyalty_transactions_by_card ON loyalty_transactions (project_id, card_id, id);
CREATE INDEX loyalty_transactions_by_campaign ON loyalty_transactions (project_id, campaign_id, id);
