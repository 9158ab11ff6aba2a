ALTER TABLE oauth_tokens DROP COLUMN origin, DROP COLUMN customer;
