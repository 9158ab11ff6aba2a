-- The expiration sweep's: buckets by date.
CREATE INDEX loyalty_point_buckets_due ON loyalty_point_buckets (expires_on);
