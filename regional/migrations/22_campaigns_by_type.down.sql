DROP INDEX campaigns_by_type;
