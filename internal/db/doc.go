// Package db is Tally's database layer with no domain knowledge: the pgx pool
// with an OpenTelemetry tracer, the one transaction helper (serializable,
// retried whole), SQLSTATEs turned into typed errors, and the check of a
// server (the migrations and the schema gate are internal/dbschema's). It
// speaks the intersection of CockroachDB's and PostgreSQL's SQL; dialect
// differences, where any, stay inside this package and dbschema.
package db
