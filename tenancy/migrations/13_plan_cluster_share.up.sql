-- The share of a regional instance's database connections one project of
-- the plan may hold at once (0 < share <= 1); NULL is the default, a
-- quarter (README: One tenant never slows another).
ALTER TABLE plans ADD COLUMN cluster_share FLOAT8 NULL;
