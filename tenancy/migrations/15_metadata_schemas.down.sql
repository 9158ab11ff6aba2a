DROP TABLE metadata_schemas;
