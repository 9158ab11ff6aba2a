DROP TABLE async_failure_subjects;
