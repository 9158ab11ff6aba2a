DROP TABLE webhooks;
ALTER TABLE projects DROP COLUMN webhook_secret_rotated_at;
ALTER TABLE projects DROP COLUMN webhook_secret_previous;
ALTER TABLE projects DROP COLUMN webhook_secret;
ALTER TABLE projects DROP COLUMN plan;
DROP TABLE plans;
