DROP TABLE publications;
