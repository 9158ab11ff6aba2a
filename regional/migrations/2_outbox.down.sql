DROP TABLE async_actions;
DROP TABLE outbox;
