DROP INDEX skus_live_source_id CASCADE;
