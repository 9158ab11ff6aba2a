-- The unfinished erasure tasks of permanent deletions (async.ErasureKind),
-- by project: while one is pending, what it has still to erase is read
-- through it (task payloads redacted as claimed, async results as read,
-- export files held), and every such read probes this index, which holds
-- only them, whatever the outbox holds.
CREATE INDEX outbox_erasing ON outbox (project_id) WHERE kind = 'customer.erasure' AND status <> 'done';
