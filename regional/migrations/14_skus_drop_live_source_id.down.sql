CREATE UNIQUE INDEX skus_live_source_id ON skus (project_id, source_id) WHERE bin_id IS NULL;
