DROP INDEX skus_source_id CASCADE;
ALTER TABLE skus ADD COLUMN bin_id TEXT NULL;
CREATE UNIQUE INDEX skus_live_source_id ON skus (project_id, source_id) WHERE bin_id IS NULL;
