ALTER TABLE campaign_templates DROP COLUMN carried;
