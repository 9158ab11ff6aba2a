DROP INDEX stacked_redemptions_by_customer;
DROP INDEX orders_by_customer;
DROP TABLE customer_erasures;
