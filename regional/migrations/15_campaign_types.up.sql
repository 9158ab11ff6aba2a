ALTER TABLE campaigns ADD COLUMN campaign_type TEXT NOT NULL DEFAULT 'LOYALTY_PROGRAM';
CREATE INDEX campaigns_by_type ON campaigns (project_id, campaign_type, id);
