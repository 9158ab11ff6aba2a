ALTER TABLE campaigns DROP COLUMN campaign_type;
