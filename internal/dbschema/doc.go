// Package dbschema is the databases' schema: applying the migrations
// (golang-migrate with a leased lock and the dialect directives rendered
// for the server), linting them for what CockroachDB refuses or runs
// differently, the tables they leave and that SQL text names (the owners
// test's reading), and the gate that keeps a binary from serving a
// database whose schema is older than it needs.
//
// It was split from internal/db, which keeps the pool, transactions,
// error classes and the server check (issue 36: packages under ~2,500
// lines, split along their seams).
package dbschema
