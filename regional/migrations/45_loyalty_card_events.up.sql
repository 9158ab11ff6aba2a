-- What happens to a loyalty card besides changes of its points, for the
-- member's activity: its publication to a holder, tier changes and pending
-- points added, changed or cancelled. Changes of points are the ledger's
-- entries (loyalty_transactions) and are not repeated here. Rows are
-- written in the transaction of what they record and read by card.
CREATE TABLE loyalty_card_events (
    project_id TEXT        NOT NULL,
    card_id    TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    type       TEXT        NOT NULL,
    data       JSONB       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, card_id, id)
);
