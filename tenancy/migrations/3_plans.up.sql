-- The plans (2).
INSERT INTO plans (name, features) VALUES
    ('free', '[]'),
    ('standard', '["webhooks"]'),
    ('enterprise', '["webhooks", "dedicated_cluster"]');
