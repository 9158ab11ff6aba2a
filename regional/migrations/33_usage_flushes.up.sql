-- The usage counter's flushes, by an id each chooses before its first
-- attempt: a flush whose COMMIT's answer was lost may have happened, and
-- the next flush reads here whether it did before adding its counts again.
-- Kept two days (the flush prunes it).
CREATE TABLE usage_flushes (
    id         TEXT        NOT NULL PRIMARY KEY,
    flushed_at TIMESTAMPTZ NOT NULL
);
