-- Vouchers (discount vouchers and gift cards, regional/vouchers) and the
-- registry of codes: a code is unique in a project across every voucher
-- type, loyalty cards included. Every writer of a voucher or a card
-- inserts its code here in the same transaction; a taken code is refused
-- (a given code: 409) or regenerated (generated codes). Schema only: 24
-- fills the registry from the loyalty cards (CockroachDB refuses a schema
-- change and a write in one transaction).
CREATE TABLE voucher_codes (
    project_id TEXT NOT NULL,
    code       TEXT NOT NULL,
    voucher_id TEXT NOT NULL,
    PRIMARY KEY (project_id, code)
);

CREATE TABLE vouchers (
    project_id          TEXT        NOT NULL,
    id                  TEXT        NOT NULL,
    code                TEXT        NOT NULL,
    campaign_id         TEXT        NULL,
    type                TEXT        NOT NULL,
    -- The voucher as the API shows it, minus the columns below (discount,
    -- gift, dates, validity, categories, metadata, additional_info).
    attrs               JSONB       NOT NULL,
    category            TEXT        NULL,
    active              BOOL        NOT NULL DEFAULT true,
    redemption_quantity INT8        NULL,
    redeemed_quantity   INT8        NOT NULL DEFAULT 0,
    holder_id           TEXT        NULL,
    -- A voucher in the trash bin keeps its row (and its code) until the
    -- bin's entry is removed.
    bin_id              TEXT        NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE UNIQUE INDEX vouchers_by_code ON vouchers (project_id, code);
CREATE INDEX vouchers_by_campaign ON vouchers (project_id, campaign_id, id);
CREATE INDEX vouchers_by_holder ON vouchers (project_id, holder_id, id);
