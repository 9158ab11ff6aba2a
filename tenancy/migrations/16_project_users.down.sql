DROP TABLE project_brandings;
DROP TABLE project_users;
DROP TABLE users;
