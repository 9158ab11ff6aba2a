-- How many custom events of each name a customer has sent, which a
-- segment's events.<name>.count condition compares: a row a customer and
-- name, incremented in the transaction that records the event, so that a
-- filter reads one row where counting custom_events would read them all.
CREATE TABLE customer_event_counts (
    project_id  TEXT   NOT NULL,
    customer_id TEXT   NOT NULL,
    event_name  TEXT   NOT NULL,
    count       BIGINT NOT NULL,
    PRIMARY KEY (project_id, customer_id, event_name)
);
