-- Client-side access tokens bound to one customer (a source_id or id) and
-- one origin: minted by the merchant's server for a browser session.
ALTER TABLE oauth_tokens ADD COLUMN customer TEXT NULL, ADD COLUMN origin TEXT NULL;
