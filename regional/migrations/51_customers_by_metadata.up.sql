-- The customers list's metadata filter (filters[metadata.<key>]) is a
-- containment on attrs->'metadata': an inverted index answers it on both
-- databases (PostgreSQL's GIN with jsonb_path_ops, CockroachDB's inverted
-- index, which takes USING GIN), so that a filtered page reads the
-- customers holding the pair, not every customer of the project. It cannot
-- lead with project_id as the others do: PostgreSQL's GIN takes a text
-- column only through the btree_gin extension, which Tally does not use;
-- the project's condition is checked on the rows it finds
-- (docs/architecture.md, Database rules).
CREATE INDEX IF NOT EXISTS customers_by_metadata ON customers USING GIN ((attrs->'metadata') {{jsonb_path_ops}});
