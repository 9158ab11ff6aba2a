-- Referral programs (regional/referrals). A referral is a referee converted
-- through a referrer's code: once per referee and program, which the unique
-- index keeps whatever races. referral_referrers counts each referrer's
-- referees in a program, one row a referrer, so that concurrent conversions
-- take turns on it and "every N referees" tiers count exactly.
CREATE TABLE referrals (
    project_id          TEXT        NOT NULL,
    id                  TEXT        NOT NULL,
    campaign_id         TEXT        NOT NULL,
    voucher_id          TEXT        NOT NULL,
    code                TEXT        NOT NULL,
    referrer_id         TEXT        NOT NULL,
    referee_id          TEXT        NOT NULL,
    related_object_type TEXT        NOT NULL, -- custom_event or redemption
    related_object_id   TEXT        NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX referrals_once ON referrals (project_id, campaign_id, referee_id);
CREATE INDEX referrals_by_referee ON referrals (project_id, referee_id, id);
CREATE INDEX referrals_by_campaign ON referrals (project_id, campaign_id, id);

CREATE TABLE referral_referrers (
    project_id  TEXT  NOT NULL,
    campaign_id TEXT  NOT NULL,
    referrer_id TEXT  NOT NULL,
    referees    INT8  NOT NULL,
    PRIMARY KEY (project_id, campaign_id, referrer_id)
);

-- The holders of referral codes: the REFERRER, written when the code is
-- published to them, and the REFEREEs added to the code or converted
-- through it. A customer holds a code once.
CREATE TABLE referral_holders (
    project_id  TEXT        NOT NULL,
    id          TEXT        NOT NULL,
    voucher_id  TEXT        NOT NULL,
    campaign_id TEXT        NOT NULL,
    customer_id TEXT        NOT NULL,
    holder_role TEXT        NOT NULL CHECK (holder_role IN ('REFERRER', 'REFEREE')),
    metadata    JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX referral_holders_once ON referral_holders (project_id, voucher_id, customer_id);
CREATE INDEX referral_holders_by_customer ON referral_holders (project_id, customer_id);
