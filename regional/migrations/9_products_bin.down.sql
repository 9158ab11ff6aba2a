DROP TABLE async_inputs;
DROP TABLE bin_entries;
DROP TABLE skus;
DROP TABLE products;
