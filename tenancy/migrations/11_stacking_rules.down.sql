DROP TABLE stacking_rules;
