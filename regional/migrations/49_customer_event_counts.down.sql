DROP TABLE customer_event_counts;
