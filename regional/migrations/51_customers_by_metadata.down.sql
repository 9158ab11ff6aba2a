DROP INDEX IF EXISTS customers_by_metadata;
