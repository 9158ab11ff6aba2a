-- The customers a job's listed failure concerns: the customer id or
-- source_id its item named for a customer (customer_ref, as the item gave
-- it), and where the failure is listed in the job's checkpoint and result
-- (the top-level array list, at position failure, from 0). A permanent
-- deletion finds by them the failures of a finished job that name nothing
-- of hers though their reason may quote a value asked for her, makes them
-- say only that she was erased, and deletes their rows. Written in the
-- transaction that lists the failure; never shown.
CREATE TABLE async_failure_subjects (
    project_id   TEXT NOT NULL,
    customer_ref TEXT NOT NULL,
    action_id    TEXT NOT NULL,
    list         TEXT NOT NULL,
    failure      INT8 NOT NULL,
    PRIMARY KEY (project_id, customer_ref, action_id, list, failure)
);
