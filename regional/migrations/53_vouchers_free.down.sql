DROP INDEX IF EXISTS vouchers_free;
