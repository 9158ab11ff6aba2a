// Package regional is the regional service: the application API of one
// cluster over that cluster's database. It trusts only the router: every
// request must carry a valid signed identity header for this cluster, and
// raw credential headers are never read. Each domain lives in a sub-package
// (customers, …) with its model, store, service and HTTP handlers.
package regional

import "embed"

// Migrations holds the schema of a regional database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MigrationsDir is the folder inside Migrations.
const MigrationsDir = "migrations"
