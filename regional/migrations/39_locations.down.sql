DROP TABLE locations;
