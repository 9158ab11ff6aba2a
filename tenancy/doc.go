// Package tenancy is the directory of the platform: clusters, projects,
// application keys and management keys, stored in the tenancy database, and
// the cached resolver through which the router and the services read it
// (host → cluster, credentials → project). Management writes it; every write
// is logged in directory_changes so that every reader's cache drops what
// changed within a second, with no shared memory between instances.
package tenancy

import "embed"

// Migrations holds the tenancy database's schema, applied by `tally migrate`.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MigrationsDir is the folder inside Migrations.
const MigrationsDir = "migrations"
