package dbschema

import (
	"github.com/tallyhq/tally/internal/db"

	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MigrationsVersion is the highest version of the migrations in dir of
// fsys: the schema version a binary embedding them needs.
func MigrationsVersion(fsys fs.FS, dir string) (uint, error) {
	src, err := iofs.New(fsys, dir)
	if err != nil {
		return 0, fmt.Errorf("db: migrations: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("db: migrations: %w", err)
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("db: migrations: %w", err)
		}
		v = next
	}
}

// Version is the version golang-migrate recorded in the database
// (its schema_migrations table, on PostgreSQL and CockroachDB alike), and
// whether it is dirty: that version's migration started and did not finish
// (it failed, or is under way). A database never migrated is at 0.
func Version(ctx context.Context, q db.Querier) (version uint, dirty bool, err error) {
	var v int64
	err = q.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &dirty)
	var pg *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pg) && pg.Code == "42P01": // no row, no table
		return 0, false, nil
	case err != nil:
		return 0, false, db.Classify(fmt.Errorf("db: read the schema version: %w", err))
	case v < 0: // golang-migrate's "no version"
		return 0, false, nil
	}
	return uint(v), dirty, nil
}

// ErrBehind is what Gate.Check fails with while the database's
// schema is older than the binary's migrations need.
var ErrBehind = errors.New("db: the database's schema is older than this binary needs")

// BehindError says how far behind a database's schema is.
type BehindError struct {
	Name    string // the database, as the message names it ("the directory")
	Version uint   // its schema's version
	Dirty   bool   // Version's migration did not finish
	Need    uint   // the version the binary needs
	Fix     string // what to do about it
}

func (e *BehindError) Error() string {
	state := ""
	if e.Dirty {
		state = " (dirty: its migration failed or is under way)"
	}
	return fmt.Sprintf("%s's schema is at version %d%s, this binary needs %d: %s", e.Name, e.Version, state, e.Need, e.Fix)
}

func (e *BehindError) Is(target error) bool { return target == ErrBehind }

// GateOptions name the database in Gate's message; zero values
// take defaults.
type GateOptions struct {
	Name string // default "the database"
	Fix  string // default "migrate it first"
	// Every is how long a schema found behind is taken as still behind
	// before it is read again (default 5 s), so that a probe every second
	// costs a query every few seconds at most.
	Every time.Duration
}

// Gate tells whether a database's schema is as new as the binary's
// migrations need: for readiness, so that a binary rolled out before its
// database was migrated does not serve against the old schema. Once the
// schema is found new enough, Check never reads the database again: a
// schema only moves forward.
type Gate struct {
	q    db.Querier
	need uint
	bad  error // reading the embedded migrations failed (never ready)
	o    GateOptions

	db.PassGate // its refusal: the last behind answer
}

// NewGate reads the highest version of the migrations in dir of fsys
// (once: embedded files do not change) and checks q's schema against it.
func NewGate(q db.Querier, fsys fs.FS, dir string, o GateOptions) *Gate {
	if o.Name == "" {
		o.Name = "the database"
	}
	if o.Fix == "" {
		o.Fix = "migrate it first"
	}
	if o.Every <= 0 {
		o.Every = 5 * time.Second
	}
	need, err := MigrationsVersion(fsys, dir)
	return &Gate{q: q, need: need, bad: err, o: o}
}

// Need is the schema version the binary needs.
func (g *Gate) Need() uint { return g.need }

// Good reports whether the schema was found new enough, without reading
// the database.
func (g *Gate) Good() bool { return g.Passed() }

// Check is nil when the schema is at least at the version needed and that
// version's migration finished; a BehindError (ErrBehind)
// when not, remembered for Every; the database's error when it cannot be
// read (not remembered: the next call tries again).
func (g *Gate) Check(ctx context.Context) error {
	if g.bad != nil {
		return g.bad
	}
	return g.Ask(g.o.Every, func() (error, error) {
		v, dirty, err := Version(ctx, g.q)
		if err != nil {
			return nil, err
		}
		// A dirty version's migration did not finish, but every one before
		// it did: a version above the one needed, even dirty, has it.
		if v > g.need || (v == g.need && !dirty) {
			return nil, nil
		}
		return &BehindError{Name: g.o.Name, Version: v, Dirty: dirty, Need: g.need, Fix: g.o.Fix}, nil
	})
}
