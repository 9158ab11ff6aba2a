-- The transactional outbox: follow-up work written in the transaction of the
-- request that causes it, run by the workers of every regional instance.
-- A claimed row's run_after is pushed to the end of its lease, so a row whose
-- worker died is due again when the lease lapses: one index serves both.
CREATE TABLE outbox (
    project_id   TEXT        NOT NULL,
    id           TEXT        NOT NULL,
    kind         TEXT        NOT NULL,
    payload      JSONB       NOT NULL,
    trace_parent TEXT        NOT NULL DEFAULT '',
    status       TEXT        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'parked')),
    attempts     INT8        NOT NULL DEFAULT 0,
    max_attempts INT8        NOT NULL,
    deadline     TIMESTAMPTZ NULL,
    run_after    TIMESTAMPTZ NOT NULL,
    lease_owner  TEXT        NULL,
    last_error   TEXT        NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
-- The workers' queue spans projects by design: claiming is the platform's
-- work, not a tenant's query. Every other access names the project.
-- Partial indexes, one per state a sweep or a claim looks for, so that the
-- claim's index holds pending tasks only: finished ones leave it, and a
-- claim poll reads no finished row however many the purge has still to
-- delete (nor, on CockroachDB, their MVCC history in the claim's span).
CREATE INDEX outbox_pending ON outbox (run_after) WHERE status = 'pending';
-- The hourly purge's order.
CREATE INDEX outbox_finished ON outbox (finished_at) WHERE status = 'done';
-- Operators' list of parked tasks.
CREATE INDEX outbox_parked ON outbox (project_id, id) WHERE status = 'parked';

-- Long-running jobs as the interface shows them (GET /v1/async-actions).
CREATE TABLE async_actions (
    project_id      TEXT        NOT NULL,
    id              TEXT        NOT NULL,
    type            TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    operation_status TEXT       NULL,
    progress        INT8        NOT NULL DEFAULT 0,
    result          JSONB       NULL,
    request_id      TEXT        NULL,
    processing_time INT8        NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
