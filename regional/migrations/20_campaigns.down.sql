ALTER TABLE campaigns RENAME TO loyalty_campaigns;
