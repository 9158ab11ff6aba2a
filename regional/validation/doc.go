// Package validation serves validation rules, the reference's v2018-08-01
// model: /v1/validation-rules (create, list, get, update, delete), their
// assignments to the objects they restrict
// (/v1/validation-rules/{id}/assignments, /v1/validation-rules-assignments),
// and their evaluation for the validation and redemption engine: a rule is
// checked and compiled by package rules (the rule language) when written,
// cached compiled by id and version, and evaluated in memory against a
// rules.Input by Evaluate or Prepare. It owns the validation_rules and
// validation_rule_assignments tables.
package validation
