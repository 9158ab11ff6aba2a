-- Project users (issue 38): the platform admins' people. A user is invited
-- (PENDING) with a role in one or more projects, and their first
-- management credential is issued once (ACTIVE); a management key with a
-- user_id acts for that user, limited to the projects they are assigned to
-- and to what their role there may call (management.roleAllows).
CREATE TABLE users (
    id         TEXT        NOT NULL PRIMARY KEY,
    login      TEXT        NOT NULL,
    first_name TEXT        NOT NULL DEFAULT '',
    last_name  TEXT        NOT NULL DEFAULT '',
    status     TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX users_login ON users (login);

CREATE TABLE project_users (
    project_id TEXT        NOT NULL,
    user_id    TEXT        NOT NULL,
    role       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_users_user ON project_users (user_id, project_id);

-- A project's branding: one a project, as the reference shapes it; Tally
-- sends no e-mail and only serves it back.
CREATE TABLE project_brandings (
    project_id TEXT        NOT NULL PRIMARY KEY,
    id         TEXT        NOT NULL,
    doc        JSONB       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NULL
);
CREATE UNIQUE INDEX project_brandings_id ON project_brandings (id);
