DROP INDEX skus_source_id CASCADE;
