DROP TABLE IF EXISTS voucher_count_shards;
