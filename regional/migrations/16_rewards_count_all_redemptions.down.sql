UPDATE rewards SET redeemed = 0 WHERE stock IS NULL;
