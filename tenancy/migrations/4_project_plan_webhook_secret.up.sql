-- A project's plan, and the secret its webhooks are signed with; the
-- previous one keeps signing (as a second Standard Webhooks signature) for
-- a day after a rotation. One statement, one schema change; 5 gives the
-- projects already there their secret.
ALTER TABLE projects
    ADD COLUMN plan TEXT NOT NULL DEFAULT 'standard',
    ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '',
    ADD COLUMN webhook_secret_previous TEXT NULL,
    ADD COLUMN webhook_secret_rotated_at TIMESTAMPTZ NULL;
