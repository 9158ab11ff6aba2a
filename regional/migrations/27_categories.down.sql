DROP TABLE categories;
