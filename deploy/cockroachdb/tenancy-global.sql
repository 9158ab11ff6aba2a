-- Run once on the multi-region tenancy database after `tally migrate`.
-- The directory is small, written rarely and read in every region: GLOBAL
-- tables give every region fast, consistent reads of it.
ALTER DATABASE tally SET PRIMARY REGION "europe-west1";
ALTER DATABASE tally ADD REGION "us-east1";
ALTER DATABASE tally ADD REGION "asia-southeast1";
ALTER TABLE clusters SET LOCALITY GLOBAL;
ALTER TABLE projects SET LOCALITY GLOBAL;
ALTER TABLE app_keys SET LOCALITY GLOBAL;
ALTER TABLE management_keys SET LOCALITY GLOBAL;
-- directory_changes is written on every directory change and read by every
-- router's poll; GLOBAL keeps the polls local too.
ALTER TABLE directory_changes SET LOCALITY GLOBAL;
