-- The free vouchers of a campaign, those a publication may give
-- (regional/vouchers, free.go): ClaimFree read them through
-- vouchers_by_campaign, in id order, skipping every voucher already held,
-- so that an AUTO_UPDATE campaign whose vouchers are all given as they are
-- made (a discount CAMPAIGN reward's) read all it had ever given on each
-- publication, twice, slower with each one. A partial index holds only the
-- free ones; a voucher leaves it when it is given. Both dialects take it.
CREATE INDEX vouchers_free ON vouchers (project_id, campaign_id, id) WHERE holder_id IS NULL AND bin_id IS NULL AND active;
