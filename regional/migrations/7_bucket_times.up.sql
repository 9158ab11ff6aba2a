-- The buckets' times, for the expiration list.
ALTER TABLE loyalty_point_buckets ADD COLUMN created_at TIMESTAMPTZ NULL, ADD COLUMN updated_at TIMESTAMPTZ NULL;
