-- Metadata schemas: per project, the typed definitions of one resource's
-- metadata (a standard resource such as customer, or a custom nested
-- object that a definition's object_type names). One schema per resource
-- and project. Deleting one leaves the metadata it described as stored.
CREATE TABLE metadata_schemas (
    project_id         TEXT        NOT NULL,
    id                 TEXT        NOT NULL,
    related_object     TEXT        NOT NULL,
    properties         JSONB       NOT NULL DEFAULT '{}',
    allow_defined_only BOOLEAN     NOT NULL DEFAULT false,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX metadata_schemas_related_object ON metadata_schemas (project_id, related_object);
