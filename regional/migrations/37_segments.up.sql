-- Customer segments (regional/segments): static ones list their customers,
-- auto-update and passive ones hold a filter over customers' attributes.
CREATE TABLE segments (
    project_id          TEXT        NOT NULL,
    id                  TEXT        NOT NULL,
    name                TEXT        NOT NULL,
    type                TEXT        NOT NULL,
    filter              JSONB       NULL,
    -- the async action that first evaluates a filter over every customer
    sync_action_id      TEXT        NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);

-- Who is in each segment: materialised in the asynchronous phase (a
-- filter's first evaluation a chunk of customers at a time, then each
-- customer's changes), read by the customers list's segment_id, a
-- customer's segments and validation rules.
CREATE TABLE segment_members (
    project_id  TEXT NOT NULL,
    segment_id  TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    PRIMARY KEY (project_id, segment_id, customer_id) {{hash_sharded}}
);
CREATE INDEX segment_members_by_customer ON segment_members (project_id, customer_id);
