DROP TABLE async_inputs;
ALTER TABLE async_actions DROP COLUMN checkpoint;
DROP TABLE bin_entries;
DROP TABLE skus;
DROP TABLE products;
