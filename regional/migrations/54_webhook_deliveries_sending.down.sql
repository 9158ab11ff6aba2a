ALTER TABLE webhook_deliveries DROP COLUMN sending_until;
