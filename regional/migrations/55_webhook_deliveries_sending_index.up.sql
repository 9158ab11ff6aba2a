-- The deliveries sending now, by project: what a permanent deletion waits
-- for reads only them (a handful), whatever the project has delivered.
CREATE INDEX webhook_deliveries_sending ON webhook_deliveries (project_id, sending_until) WHERE sending_until IS NOT NULL;
