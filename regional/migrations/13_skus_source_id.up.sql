-- skus holds live SKUs only (12 moved the others out), so its source_id is
-- unique without a predicate. 14 drops the partial index and 15 the
-- column, each in a file of its own: CockroachDB runs a file as one
-- transaction, where dropping a column with other schema changes is
-- unsafe.
CREATE UNIQUE INDEX skus_source_id ON skus (project_id, source_id);
