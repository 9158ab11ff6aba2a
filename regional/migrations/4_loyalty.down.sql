DROP TABLE loyalty_transactions;
DROP TABLE loyalty_point_buckets;
DROP TABLE loyalty_cards;
DROP TABLE loyalty_campaigns;
