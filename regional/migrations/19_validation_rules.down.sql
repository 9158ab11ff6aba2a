DROP TABLE validation_rule_assignments;
DROP TABLE validation_rules;
