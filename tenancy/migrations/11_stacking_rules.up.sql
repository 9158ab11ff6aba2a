-- A project's customised stacking rules (the management API's
-- /projects/{id}/stacking-rules): at most one row per project; without
-- one the project has the defaults (tenancy.DefaultStackingRules).
CREATE TABLE stacking_rules (
    project_id TEXT        NOT NULL PRIMARY KEY,
    id         TEXT        NOT NULL,
    rules      JSONB       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL
);
