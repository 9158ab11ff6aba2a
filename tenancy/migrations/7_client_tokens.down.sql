ALTER TABLE oauth_tokens DROP COLUMN origin;
ALTER TABLE oauth_tokens DROP COLUMN customer;
