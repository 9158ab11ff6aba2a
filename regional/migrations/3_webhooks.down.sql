DROP TABLE api_usage;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
