-- Every row of tenant data carries project_id first in its primary key and in
-- every index, and every query filters on it.
CREATE TABLE customers (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    source_id  TEXT        NULL,
    name       TEXT        NULL,
    email      TEXT        NULL,
    attrs      JSONB       NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE UNIQUE INDEX customers_by_source_id ON customers (project_id, source_id);
CREATE INDEX customers_by_email ON customers (project_id, email);
