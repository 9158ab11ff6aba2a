-- The tenancy directory: small, written rarely, read everywhere. On
-- CockroachDB these tables are made GLOBAL in a multi-region database (see
-- deploy/); the SQL here is the part both dialects share.
CREATE TABLE clusters (
    name          TEXT        NOT NULL PRIMARY KEY,
    region        TEXT        NOT NULL,
    kind          TEXT        NOT NULL CHECK (kind IN ('shared', 'dedicated')),
    api_host      TEXT        NOT NULL UNIQUE,
    download_host TEXT        NULL UNIQUE,
    upstream_url  TEXT        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE projects (
    id          TEXT        NOT NULL PRIMARY KEY,
    name        TEXT        NOT NULL,
    description TEXT        NULL,
    cluster     TEXT        NOT NULL REFERENCES clusters (name),
    api_version TEXT        NOT NULL,
    settings    JSONB       NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    deleted_at  TIMESTAMPTZ NULL
);

-- Application keys: the app id is shown, the token only as its SHA-256.
CREATE TABLE app_keys (
    app_id     TEXT        NOT NULL PRIMARY KEY,
    project_id TEXT        NOT NULL REFERENCES projects (id),
    kind       TEXT        NOT NULL CHECK (kind IN ('app', 'client')),
    name       TEXT        NOT NULL DEFAULT '',
    token_hash BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ NULL
);
CREATE INDEX app_keys_by_project ON app_keys (project_id, app_id);

CREATE TABLE management_keys (
    id         TEXT        NOT NULL PRIMARY KEY,
    name       TEXT        NOT NULL DEFAULT '',
    token_hash BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ NULL
);

-- Every change a cache may hold is logged here; routers and services poll it
-- to evict what changed (see tenancy.Resolver.Watch).
CREATE TABLE directory_changes (
    id         TEXT        NOT NULL PRIMARY KEY,
    kind       TEXT        NOT NULL,
    key        TEXT        NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX directory_changes_by_time ON directory_changes (changed_at);
