-- Publications (regional/publications): a voucher of a campaign given to a
-- customer (POST /v1/publications), or a refused attempt (result FAILURE,
-- with its failure_code). One row per attempt; the voucher's holder is set
-- by regional/vouchers in the same transaction.
CREATE TABLE publications (
    project_id       TEXT        NOT NULL,
    id               TEXT        NOT NULL,
    campaign_id      TEXT        NULL,
    campaign_name    TEXT        NULL,
    voucher_id       TEXT        NULL,
    voucher_code     TEXT        NULL,
    voucher_type     TEXT        NULL,
    is_referral_code BOOL        NOT NULL DEFAULT false,
    customer_id      TEXT        NOT NULL,
    tracking_id      TEXT        NULL, -- the customer's source_id
    channel          TEXT        NOT NULL,
    source_id        TEXT        NULL, -- the request's source_id: one publication per value
    result           TEXT        NOT NULL,
    failure_code     TEXT        NULL,
    failure_message  TEXT        NULL,
    metadata         JSONB       NOT NULL,
    -- The campaign's id on a successful publication of a join_once
    -- campaign, else NULL: the unique index below lets a customer join
    -- such a campaign once, whatever races.
    join_once_campaign TEXT      NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE UNIQUE INDEX publications_by_source ON publications (project_id, source_id);
CREATE UNIQUE INDEX publications_join_once ON publications (project_id, customer_id, join_once_campaign);
CREATE INDEX publications_by_customer ON publications (project_id, customer_id, campaign_id, id);
CREATE INDEX publications_by_campaign ON publications (project_id, campaign_id, id);
CREATE INDEX publications_by_voucher ON publications (project_id, voucher_code, id);
