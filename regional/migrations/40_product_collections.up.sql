-- A project's product collections (issue 37): STATIC ones list their
-- products and SKUs (products, as written: [{id, object, product_id}]),
-- AUTO_UPDATE ones hold a filter over products and SKUs.
CREATE TABLE product_collections (
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    filter JSONB,
    products JSONB,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX product_collections_by_name ON product_collections (project_id, name);
CREATE INDEX product_collections_created ON product_collections (project_id, created_at, id);
