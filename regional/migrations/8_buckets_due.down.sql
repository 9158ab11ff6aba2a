DROP INDEX loyalty_point_buckets_due;
