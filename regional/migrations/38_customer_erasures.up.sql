-- Customers permanently deleted (regional/customers): the tombstone that
-- makes a later read of the id say so, and the deletion's answer. The
-- customer's row is gone and its source_id free; ledger entries, orders,
-- cards and redemptions keep the id.
CREATE TABLE customer_erasures (
    project_id  TEXT        NOT NULL,
    customer_id TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    data_json   JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, customer_id)
);

-- What an erasure reads of a customer in the tables that hold their id
-- without an index on it.
CREATE INDEX orders_by_customer ON orders (project_id, customer_id);
CREATE INDEX stacked_redemptions_by_customer ON stacked_redemptions (project_id, customer_id);
