-- Categories (regional/categories): a project's named categories, ordered
-- by hierarchy. A voucher names its category by id (vouchers.category_id,
-- read with a join, so a renamed category reads renamed and a deleted one
-- reads as none; 28 adds the column); vouchers.category keeps the name as
-- written, the tag a voucher without category_id shows. Campaigns keep
-- their category's name and id in their attrs document, followed on a
-- rename or a deletion.
CREATE TABLE categories (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    hierarchy  INT8        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX categories_by_name ON categories (project_id, name);
