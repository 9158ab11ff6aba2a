-- The items of a job's stored input (async_inputs) that a permanent
-- deletion redacted because they named the customer: the job reports each
-- one failed rather than apply what the redaction left of it. item is the
-- job's item index (0 for the first element of a JSON array, or the first
-- data row of a CSV file). Removed with the input when the job finishes.
CREATE TABLE async_input_erasures (
    project_id TEXT NOT NULL,
    action_id  TEXT NOT NULL,
    item       INT8 NOT NULL,
    PRIMARY KEY (project_id, action_id, item)
);
