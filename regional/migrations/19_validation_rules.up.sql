-- Validation rules (the reference's v2018-08-01 model) and their
-- assignments to the objects they restrict. A rule's documents (rules,
-- bundle_rules, error, applicable_to) are kept as the JSON text the request
-- gave, so they read back exactly as sent; version counts the rule's
-- changes and keys the compiled rules each instance caches.
CREATE TABLE validation_rules (
    project_id    TEXT        NOT NULL,
    id            TEXT        NOT NULL,
    name          TEXT        NOT NULL,
    rules         TEXT        NOT NULL,
    bundle_rules  TEXT        NULL,
    error         TEXT        NULL,
    applicable_to TEXT        NULL,
    type          TEXT        NOT NULL,
    context_type  TEXT        NOT NULL,
    version       INT8        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
-- A rule's name is unique in its project, as the reference says.
CREATE UNIQUE INDEX validation_rules_by_name ON validation_rules (project_id, name);

-- The related object is kept by type and id as given: campaigns, vouchers,
-- promotion tiers, earning rules, reward assignments, distributions.
CREATE TABLE validation_rule_assignments (
    project_id          TEXT        NOT NULL,
    id                  TEXT        NOT NULL,
    rule_id             TEXT        NOT NULL,
    related_object_type TEXT        NOT NULL,
    related_object_id   TEXT        NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
-- A rule is assigned to an object once (force=true replaces it).
CREATE UNIQUE INDEX validation_rule_assignments_once
    ON validation_rule_assignments (project_id, rule_id, related_object_type, related_object_id);
CREATE INDEX validation_rule_assignments_by_object
    ON validation_rule_assignments (project_id, related_object_id, id);
