-- Exports: the request and its state, and the file, kept in the cluster's
-- own database in chunks of at most a mebibyte (the file never leaves its
-- region). parameters is the normalised request the export runs with;
-- parts, once DONE, is a JSON array of {rows, bytes} per part.
CREATE TABLE exports (
    project_id      TEXT        NOT NULL,
    id              TEXT        NOT NULL,
    exported_object TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    channel         TEXT        NOT NULL,
    parameters      JSONB       NOT NULL,
    parts           JSONB       NULL,
    total_rows      INT8        NULL,
    done_rows       INT8        NOT NULL DEFAULT 0,
    error           JSONB       NULL,
    action_id       TEXT        NULL,
    -- The run of the job that owns the file: a run superseded by another
    -- (its lease lapsed) finds itself no longer named and stops.
    run_id          TEXT        NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX exports_by_expiry ON exports (expires_at);

-- offset_bytes is where the chunk starts in its part: a Range request reads
-- only the chunks it covers, by the key.
CREATE TABLE export_chunks (
    project_id   TEXT  NOT NULL,
    export_id    TEXT  NOT NULL,
    run_id       TEXT  NOT NULL,
    part         INT4  NOT NULL,
    offset_bytes INT8  NOT NULL,
    data         BYTEA NOT NULL,
    PRIMARY KEY (project_id, export_id, run_id, part, offset_bytes)
);
