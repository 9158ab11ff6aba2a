DROP TABLE publication_vouchers;
