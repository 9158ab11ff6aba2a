DROP TABLE referral_holders;
DROP TABLE referral_referrers;
DROP TABLE referrals;
