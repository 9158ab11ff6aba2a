// Package migrations holds the schema of a regional database on its own, so
// that a package's tests can migrate a database (regionaltest) without
// depending on the regional service, which imports every domain package: a
// test binary that held both a package's internal test files and the
// packages above it would compile each of them a second time. The service
// embeds the same files as regional.Migrations.
package migrations

import "embed"

// FS holds the migration files, at its root.
//
//go:embed *.sql
var FS embed.FS

// Dir is the folder inside FS that holds them.
const Dir = "."
