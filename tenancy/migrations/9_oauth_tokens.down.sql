DROP TABLE oauth_tokens;
