-- skus holds live SKUs only (8_binned_skus moved the others out), so its
-- source_id is unique without a predicate. Schema changes only: CockroachDB
-- refuses a schema change after a write in one transaction, which is why
-- this is not part of 8.
DROP INDEX skus_live_source_id CASCADE;
ALTER TABLE skus DROP COLUMN bin_id;
CREATE UNIQUE INDEX skus_source_id ON skus (project_id, source_id);
