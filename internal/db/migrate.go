package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/cockroachdb"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for golang-migrate
)

// Migrate applies the embedded migrations in dir of fsys to the database at
// url, up to the latest version. It is safe to run concurrently from several
// instances: golang-migrate takes its lock first (an advisory lock on
// PostgreSQL, a lock table on CockroachDB, whose driver it picks itself).
func Migrate(ctx context.Context, url string, fsys fs.FS, dir string) error {
	src, err := iofs.New(fsys, dir)
	if err != nil {
		return fmt.Errorf("migrate: source: %w", err)
	}
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("migrate: open: %w", err)
	}
	defer sqlDB.Close()
	var version string
	if err := sqlDB.QueryRowContext(ctx, "SELECT version()").Scan(&version); err != nil {
		return Classify(fmt.Errorf("migrate: connect: %w", err))
	}
	var drv database.Driver
	if strings.Contains(version, "CockroachDB") {
		var enabled any // a BOOL
		if err := sqlDB.QueryRowContext(ctx, `SHOW CLUSTER SETTING sql.txn.read_committed_isolation.enabled`).Scan(&enabled); err != nil {
			return fmt.Errorf("migrate: read the CockroachDB setting sql.txn.read_committed_isolation.enabled: %w", err)
		}
		if err := checkCockroach(version, fmt.Sprint(enabled)); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		drv, err = cockroachdb.WithInstance(sqlDB, &cockroachdb.Config{})
	} else {
		drv, err = migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	}
	if err != nil {
		return fmt.Errorf("migrate: driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "tally", drv)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// The driver holds a connection of sqlDB's, which sqlDB.Close leaves
	// open while it is held: closing m gives it back (and the source).
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate: up: %w", err)
	}
	return nil
}
