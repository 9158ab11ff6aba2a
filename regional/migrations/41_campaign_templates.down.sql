DROP TABLE campaign_templates;
