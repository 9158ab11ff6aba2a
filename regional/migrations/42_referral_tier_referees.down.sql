DROP TABLE referral_tier_referees;
