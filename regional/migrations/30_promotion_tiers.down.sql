DROP TABLE promotion_stacks;
DROP TABLE promotion_tiers;
