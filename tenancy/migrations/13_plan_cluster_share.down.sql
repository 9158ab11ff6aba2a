ALTER TABLE plans DROP COLUMN cluster_share;
