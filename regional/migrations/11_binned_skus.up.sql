-- SKUs in the bin move to a table of their own instead of being marked in
-- place. Moving a product's 1,000 SKUs (one DELETE … RETURNING feeding an
-- INSERT) costs PostgreSQL about 8 ms where marking them, an UPDATE of every
-- row, cost 25–30 ms; and skus keeps live rows only. Products, one row per
-- deletion, stay marked with bin_id. 12 moves the binned SKUs; 13 to 15
-- make skus a table of live SKUs.
--
-- No foreign key: a binned SKU goes with its product, in the transaction
-- that removes the product for good.
CREATE TABLE binned_skus (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    product_id TEXT        NOT NULL,
    source_id  TEXT        NULL,
    sku        TEXT        NULL,
    price      INT8        NULL,
    currency   TEXT        NULL,
    attributes JSONB       NOT NULL DEFAULT '{}',
    metadata   JSONB       NOT NULL DEFAULT '{}',
    image_url  TEXT        NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    bin_id     TEXT        NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX binned_skus_by_product ON binned_skus (project_id, product_id);
