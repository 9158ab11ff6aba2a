-- What a template copied from another project carries of it (products,
-- SKUs, collections, segments, locations its rules name), made in its
-- project at each setup; NULL for a template saved in its project.
ALTER TABLE campaign_templates ADD COLUMN carried JSONB;
