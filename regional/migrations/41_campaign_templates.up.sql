-- Campaign templates (issue 38): a discount or gift campaign's, or a
-- promotion tier's, settings kept as the body that creates it again
-- (source says which), with copies of its validation rules' definitions,
-- so that a later change to the source or its rules leaves the template
-- as it was saved.
CREATE TABLE campaign_templates (
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    campaign_type TEXT NOT NULL,
    source TEXT NOT NULL,
    body JSONB NOT NULL,
    rules JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX campaign_templates_by_name ON campaign_templates (project_id, name);
