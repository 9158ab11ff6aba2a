CREATE INDEX campaigns_by_type ON campaigns (project_id, campaign_type, id);
