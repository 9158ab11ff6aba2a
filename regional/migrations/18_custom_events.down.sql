DROP INDEX earning_rules_by_event;
DROP TABLE custom_event_accruals;
DROP TABLE customer_activities;
DROP TABLE custom_events;
