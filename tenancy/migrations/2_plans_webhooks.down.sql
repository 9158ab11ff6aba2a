DROP TABLE webhooks;
DROP TABLE plans;
