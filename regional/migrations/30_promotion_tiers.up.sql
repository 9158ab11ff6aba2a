-- Promotion tiers (regional/promotions): the automatic discounts of a
-- PROMOTION campaign, applied without a code when the order and customer
-- meet the tier's validation rules; hierarchy orders them in their
-- campaign. attrs holds the banner, the action's discount, metadata,
-- dates, validity and category as the API shapes them.
CREATE TABLE promotion_tiers (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    active      BOOL        NOT NULL,
    hierarchy   INT8        NOT NULL,
    attrs       JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX promotion_tiers_by_campaign ON promotion_tiers (project_id, campaign_id, hierarchy, id);

-- Promotion stacks: named groups of a campaign's tiers applied together.
CREATE TABLE promotion_stacks (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    attrs       JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX promotion_stacks_by_campaign ON promotion_stacks (project_id, campaign_id, id);
