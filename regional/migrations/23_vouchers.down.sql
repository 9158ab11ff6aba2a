DROP TABLE vouchers;
DROP TABLE voucher_codes;
