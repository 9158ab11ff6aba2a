ALTER TABLE loyalty_point_buckets DROP COLUMN updated_at, DROP COLUMN created_at;
