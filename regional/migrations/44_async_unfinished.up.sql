-- A project's unfinished actions of a type, which a job that runs one at a
-- time (the order import) waits for, read without a scan of the project's
-- past actions.
CREATE INDEX async_actions_unfinished ON async_actions (project_id, type, id) WHERE status IN ('ENQUEUED', 'IN_PROGRESS');
