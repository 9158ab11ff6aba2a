DROP TABLE directory_changes;
DROP TABLE management_keys;
DROP TABLE app_keys;
DROP TABLE projects;
DROP TABLE clusters;
