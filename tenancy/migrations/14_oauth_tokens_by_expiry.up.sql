-- The token sweep deletes expired tokens of every project in batches, in
-- order of expiry (tenancy.DropExpiredTokens): oauth_tokens_live leads with
-- the project, so it cannot serve that order.
CREATE INDEX oauth_tokens_by_expiry ON oauth_tokens (expires_at);
