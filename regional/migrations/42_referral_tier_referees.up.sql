-- How many referees of a referrer each referral tier that requires a
-- segment has counted (issue 37): only those in the segment when they
-- converted count towards the tier.
CREATE TABLE referral_tier_referees (
    project_id TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    referrer_id TEXT NOT NULL,
    tier_id TEXT NOT NULL,
    referees INT8 NOT NULL,
    PRIMARY KEY (project_id, campaign_id, referrer_id, tier_id)
);
