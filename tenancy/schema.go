package tenancy

import "github.com/tallyhq/tally/internal/db"

// NewSchemaGate checks the directory's schema against this binary's
// tenancy migrations (Migrations): a router, regional or management
// instance rolled out before management's release migrated the directory
// is not ready (db.SchemaGate).
func NewSchemaGate(q db.Querier) *db.SchemaGate {
	return db.NewSchemaGate(q, Migrations, MigrationsDir, db.SchemaGateOptions{
		Name: "the directory",
		Fix:  "migrate the tenancy database (management's release) first",
	})
}
