package tenancy

import (
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
)

// NewSchemaGate checks the directory's schema against this binary's
// tenancy migrations (Migrations): a router, regional or management
// instance rolled out before management's release migrated the directory
// is not ready (dbschema.Gate).
func NewSchemaGate(q db.Querier) *dbschema.Gate {
	return dbschema.NewGate(q, Migrations, MigrationsDir, dbschema.GateOptions{
		Name: "the directory",
		Fix:  "migrate the tenancy database (management's release) first",
	})
}
