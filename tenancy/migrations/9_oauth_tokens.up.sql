-- OAuth access tokens (client credentials): only a hash of each is kept.
CREATE TABLE oauth_tokens (
    token_hash TEXT        NOT NULL PRIMARY KEY, -- hex SHA-256 of the token
    project_id TEXT        NOT NULL,
    app_id     TEXT        NOT NULL,             -- the key that issued it
    scopes     TEXT        NOT NULL,             -- space-separated
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ NULL
);
CREATE INDEX oauth_tokens_live ON oauth_tokens (project_id, expires_at);
