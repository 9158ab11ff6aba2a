DROP INDEX oauth_tokens_by_expiry;
