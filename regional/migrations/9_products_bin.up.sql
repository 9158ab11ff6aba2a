-- Products and their SKUs. A row moved to the bin stays here, bin_id naming
-- its bin entry: everything the API serves reads live rows (bin_id IS NULL),
-- and a source_id is unique among live rows only, so a binned product's
-- source_id is free at once. Partial indexes are in both dialects.
CREATE TABLE products (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    source_id  TEXT        NULL,
    name       TEXT        NULL,
    price      INT8        NULL,
    attributes JSONB       NOT NULL DEFAULT '[]',
    metadata   JSONB       NOT NULL DEFAULT '{}',
    image_url  TEXT        NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    bin_id     TEXT        NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE UNIQUE INDEX products_live_source_id ON products (project_id, source_id) WHERE bin_id IS NULL;

CREATE TABLE skus (
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
    bin_id     TEXT        NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}},
    FOREIGN KEY (project_id, product_id) REFERENCES products (project_id, id)
);
CREATE INDEX skus_by_product ON skus (project_id, product_id, id);
CREATE UNIQUE INDEX skus_live_source_id ON skus (project_id, source_id) WHERE bin_id IS NULL;

-- The bin: what was deleted without force, until it is removed for good by
-- DELETE /v1/trash-bin/{id} or by the retention sweep.
CREATE TABLE bin_entries (
    project_id         TEXT        NOT NULL,
    id                 TEXT        NOT NULL,
    resource_type      TEXT        NOT NULL,
    resource_id        TEXT        NOT NULL,
    resource_name      TEXT        NULL,
    resource_parent_id TEXT        NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX bin_entries_by_parent ON bin_entries (project_id, resource_parent_id);
-- The retention sweep's, across projects like the outbox's queue.
CREATE INDEX bin_entries_by_age ON bin_entries (created_at);

-- A job's uploaded input (an imported CSV file, a bulk update's items), in
-- parts of at most 512 KiB: kept out of the outbox row that starts the job,
-- and removed when the job finishes.
CREATE TABLE async_inputs (
    project_id TEXT  NOT NULL,
    action_id  TEXT  NOT NULL,
    part       INT8  NOT NULL,
    data       BYTEA NOT NULL,
    PRIMARY KEY (project_id, action_id, part)
);
