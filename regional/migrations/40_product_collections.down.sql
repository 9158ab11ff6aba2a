DROP TABLE product_collections;
