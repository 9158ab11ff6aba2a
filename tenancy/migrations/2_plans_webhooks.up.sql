-- Plans grant features; a project has one plan.
CREATE TABLE plans (
    name       TEXT        NOT NULL PRIMARY KEY,
    features   JSONB       NOT NULL DEFAULT '[]',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO plans (name, features) VALUES
    ('free', '[]'),
    ('standard', '["webhooks"]'),
    ('enterprise', '["webhooks", "dedicated_cluster"]');

ALTER TABLE projects ADD COLUMN plan TEXT NOT NULL DEFAULT 'standard';
-- The secret webhooks are signed with; the previous one keeps signing (as a
-- second Standard Webhooks signature) for a day after a rotation.
ALTER TABLE projects ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN webhook_secret_previous TEXT NULL;
ALTER TABLE projects ADD COLUMN webhook_secret_rotated_at TIMESTAMPTZ NULL;
UPDATE projects SET webhook_secret = 'whsec_' || md5(random()::TEXT || id) WHERE webhook_secret = '';

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
