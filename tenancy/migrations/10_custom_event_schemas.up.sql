-- Custom event schemas: the events a project may send (POST /v1/events) and
-- the metadata each carries. A project's, so project_id leads the key; a
-- name is taken once per project. Deleting one is permanent (a hard delete).
CREATE TABLE custom_event_schemas (
    project_id TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    properties JSONB       NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX custom_event_schemas_name ON custom_event_schemas (project_id, name);
