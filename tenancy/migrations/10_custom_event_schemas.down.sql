DROP TABLE custom_event_schemas;
