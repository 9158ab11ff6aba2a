-- The region's database, run by the cockroachdb-setup Job (as root) with
-- @DATABASE@, @REGION@ and @BACKUP_URI@ from the overlay's tally-config and
-- @ORGANIZATION@, @LICENSE@ from the Secret cockroachdb-license.
-- Every statement may run again: the Job runs once per release.
--
-- The licence: since v24.3 a cluster without a licence key is throttled once
-- its grace period is over. The key is a cluster setting (one per
-- CockroachDB cluster; every region's Job sets the same one), read from the
-- Secret cockroachdb-license (terraform, from Secrets Manager), never from git.
SET CLUSTER SETTING cluster.organization = '@ORGANIZATION@';
SET CLUSTER SETTING enterprise.license = '@LICENSE@';
SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true;
CREATE USER IF NOT EXISTS tally;
-- `tally migrate` and the regional service read cluster settings at start.
GRANT SYSTEM VIEWCLUSTERSETTING TO tally;
CREATE DATABASE IF NOT EXISTS @DATABASE@;
-- Tenant data never leaves its region: the database lives in its region
-- only, every replica included.
ALTER DATABASE @DATABASE@ SET PRIMARY REGION "@REGION@";
SET enable_multiregion_placement_policy = on;
ALTER DATABASE @DATABASE@ PLACEMENT RESTRICTED;
GRANT ALL ON DATABASE @DATABASE@ TO tally;
-- Hourly incremental backups and a daily full one, kept in the region's
-- bucket (the node's IAM role writes it: AUTH=implicit).
CREATE SCHEDULE IF NOT EXISTS backup_@DATABASE@
  FOR BACKUP DATABASE @DATABASE@ INTO '@BACKUP_URI@'
  RECURRING '@hourly' FULL BACKUP '@daily'
  WITH SCHEDULE OPTIONS first_run = 'now';
