DROP TABLE binned_skus;
