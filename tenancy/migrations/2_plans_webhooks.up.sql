-- Plans grant features; a project has one plan (4). Schema only: each
-- migration file runs as one transaction on CockroachDB, and a write
-- goes in a file of its own after the schema it needs (3 writes the
-- plans; docs/architecture.md, Database rules).
CREATE TABLE plans (
    name       TEXT        NOT NULL PRIMARY KEY,
    features   JSONB       NOT NULL DEFAULT '[]',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Webhook configurations: a project's, so project_id leads the key.
CREATE TABLE webhooks (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    target_url TEXT        NOT NULL,
    events     JSONB       NOT NULL,
    active     BOOL        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    deleted_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
