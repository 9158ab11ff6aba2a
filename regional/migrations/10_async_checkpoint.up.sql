-- What a job has committed so far, so that a job run again after its
-- worker died goes on from there instead of repeating it.
ALTER TABLE async_actions ADD COLUMN checkpoint JSONB NULL;
