// Package rules is the language of validation rules: what a rule's rules,
// error and applicable_to documents may say, and what they answer for an
// order, a customer and the redemptions so far. A rule's rules is an
// object of numbered (or named) conditions and a logic expression over
// their keys:
//
//	{"1": {"name": "order.amount", "conditions": {"$more_than": [5000]},
//	       "error": {"message": "…"}, "rules": {…nested, same shape…}},
//	 "logic": "1 and (2 or 3)"}
//
// Compile checks the documents once, when a rule is written, and turns
// them into a Program that Run evaluates in memory against an Input:
// nothing is parsed per evaluation. The package holds no SQL and knows no
// project: regional/validation stores the rules, caches their programs
// and hands the engine their verdicts.
//
// The files follow the language's seams: the names a condition reads
// (names.go), the compiler of groups and conditions (compile.go), the
// conditions on values (ops.go), the values a condition takes (values.go),
// the logic expression (logic.go), applicable_to (applicable.go), and the
// input and its evaluation (input.go, eval.go).
package rules
