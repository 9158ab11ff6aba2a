-- The tenancy database (the directory) across the shared regions: run by
-- the tally-tenancy-global Job of the control plane (deploy/control-plane),
-- as root, with @DATABASE@, @PRIMARY_REGION@, @ADD_REGIONS@, @CLIENT_USERS@
-- and @BACKUP_URI@ from its tally-control-config. Every statement may run again
-- (the Job runs once per release); the ALTER TABLEs fail until management's
-- init container has migrated the database, and the Job retries.
SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true;
CREATE USER IF NOT EXISTS tally;
GRANT SYSTEM VIEWCLUSTERSETTING TO tally;
CREATE DATABASE IF NOT EXISTS @DATABASE@;
GRANT ALL ON DATABASE @DATABASE@ TO tally;
ALTER DATABASE @DATABASE@ SET PRIMARY REGION "@PRIMARY_REGION@";
-- One `ALTER DATABASE … ADD REGION IF NOT EXISTS "<region>";` per region.
@ADD_REGIONS@
-- The directory survives the loss of a whole region (needs three regions;
-- writes wait for a second region).
ALTER DATABASE @DATABASE@ SURVIVE REGION FAILURE;

USE @DATABASE@;
-- Every table of tenancy/migrations has its placement here (the rules test
-- checks it): GLOBAL where the directory is read in every region and written
-- rarely, REGIONAL BY ROW where a region writes often and reads its own rows.
ALTER TABLE clusters SET LOCALITY GLOBAL;
ALTER TABLE projects SET LOCALITY GLOBAL;
ALTER TABLE app_keys SET LOCALITY GLOBAL;
ALTER TABLE management_keys SET LOCALITY GLOBAL;
-- Written on every directory change, read by every router's poll.
ALTER TABLE directory_changes SET LOCALITY GLOBAL;
ALTER TABLE plans SET LOCALITY GLOBAL;
-- Read by regional's webhook delivery and events in every region.
ALTER TABLE webhooks SET LOCALITY GLOBAL;
ALTER TABLE custom_event_schemas SET LOCALITY GLOBAL;
-- Read by regional's metadata checks in every region, written by admins.
ALTER TABLE metadata_schemas SET LOCALITY GLOBAL;
-- Read on every management request of a project user, written rarely.
ALTER TABLE users SET LOCALITY GLOBAL;
ALTER TABLE project_users SET LOCALITY GLOBAL;
ALTER TABLE project_brandings SET LOCALITY GLOBAL;
ALTER TABLE stacking_rules SET LOCALITY GLOBAL;
-- A project's rate windows are leased by the routers of its region about
-- once a second: their rows live there.
ALTER TABLE rate_windows SET LOCALITY REGIONAL BY ROW;
-- Tokens are issued and then used on the same cluster's host: their rows
-- live in the region that issued them.
ALTER TABLE oauth_tokens SET LOCALITY REGIONAL BY ROW;

-- The dedicated clusters' users (TENANCY_CLIENT_USERS, one
-- `CREATE USER IF NOT EXISTS tenancy_<name>;` and its grants each): the
-- rows of the tenancy database, today's tables and those later migrations
-- of `tally` create, and nothing of any region's database. A dedicated
-- cluster holds only a client certificate for its own user.
@CLIENT_USERS@

CREATE SCHEDULE IF NOT EXISTS backup_@DATABASE@
  FOR BACKUP DATABASE @DATABASE@ INTO '@BACKUP_URI@'
  RECURRING '@hourly' FULL BACKUP '@daily'
  WITH SCHEDULE OPTIONS first_run = 'now';
