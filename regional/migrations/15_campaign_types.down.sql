DROP INDEX campaigns_by_type;
ALTER TABLE campaigns DROP COLUMN campaign_type;
