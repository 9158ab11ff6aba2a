ALTER TABLE projects DROP COLUMN webhook_secret_rotated_at, DROP COLUMN webhook_secret_previous,
    DROP COLUMN webhook_secret, DROP COLUMN plan;
