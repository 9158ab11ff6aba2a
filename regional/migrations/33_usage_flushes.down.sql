DROP TABLE usage_flushes;
