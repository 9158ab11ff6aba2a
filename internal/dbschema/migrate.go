package dbschema

import (
	"github.com/tallyhq/tally/internal/db"

	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/cockroachdb"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for golang-migrate
)

// MigrateOptions tune Migrate's lock; the zero value is the defaults.
type MigrateOptions struct {
	// LockWait bounds the wait for the migration lock another migrator
	// holds (default 10 minutes): past it, Migrate fails with
	// ErrMigrationLocked, naming the holder.
	LockWait time.Duration
	// Lease is how long the lock outlives its holder's last renewal, so the
	// lock of a migrator that was killed lapses (default 30 s). The holder
	// renews it every third of it while it migrates.
	Lease time.Duration
	// Holder names this migrator in the lock, for the message of another
	// that waits (default "host <hostname> pid <pid>").
	Holder string
	// Log is told when the migrator starts waiting and when it takes over a
	// lapsed lock (default slog.Default()).
	Log *slog.Logger
}

// ErrMigrationLocked is what Migrate fails with when another migrator held
// the migration lock for all of MigrateOptions.LockWait.
var ErrMigrationLocked = errors.New("migration lock held by another migrator")

// Migrate applies the embedded migrations in dir of fsys to the database at
// url, up to the latest version, with the default MigrateOptions.
func Migrate(ctx context.Context, url string, fsys fs.FS, dir string) error {
	return MigrateWith(ctx, url, fsys, dir, MigrateOptions{})
}

// MigrateWith applies the embedded migrations in dir of fsys to the database
// at url, up to the latest version. It is safe to run concurrently from
// several instances: each takes the migration lock first, a leased row of
// tally_migration_lock (one mechanism on both databases: golang-migrate's
// own is an advisory lock on PostgreSQL, which waits without bound, and a
// row on CockroachDB, which fails at once when held and stays forever when
// its migrator is killed). A second migrator waits for the lock up to
// o.LockWait, then fails saying who holds it; a killed migrator's lock
// lapses o.Lease after its last renewal.
func MigrateWith(ctx context.Context, url string, fsys fs.FS, dir string, o MigrateOptions) (err error) {
	if o.LockWait <= 0 {
		o.LockWait = 10 * time.Minute
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("host %s pid %d", host, os.Getpid())
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
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
		return db.Classify(fmt.Errorf("migrate: connect: %w", err))
	}
	cockroach := strings.Contains(version, "CockroachDB")
	if cockroach {
		var enabled any // a BOOL
		if err := sqlDB.QueryRowContext(ctx, `SHOW CLUSTER SETTING sql.txn.read_committed_isolation.enabled`).Scan(&enabled); err != nil {
			return fmt.Errorf("migrate: read the CockroachDB setting sql.txn.read_committed_isolation.enabled: %w", err)
		}
		if err := db.JudgeServer(version, fmt.Sprint(enabled)); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}

	lock, err := takeMigrationLock(ctx, sqlDB, o)
	if err != nil {
		return err
	}
	released := false
	defer func() {
		if !released {
			if lerr := lock.release(); lerr != nil && err == nil {
				err = lerr
			}
		}
	}()

	var drv database.Driver
	if cockroach {
		// The driver's constructor takes its own lock row (schema_lock) to
		// make its version table: one a migrator killed there left behind
		// would stop every later one, and we hold the lock that counts.
		if err := clearCockroachLockRow(ctx, sqlDB); err != nil {
			return err
		}
		drv, err = cockroachdb.WithInstance(sqlDB, &cockroachdb.Config{})
	} else {
		drv, err = migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	}
	if err != nil {
		return fmt.Errorf("migrate: driver: %w", err)
	}
	// The files' directives ({{hash_sharded}}) rendered for this server.
	dialect := db.PostgreSQL
	if cockroach {
		dialect = db.CockroachDB
	}
	m, err := migrate.NewWithInstance("iofs", renderedSource{src, dialect}, "tally", leasedDriver{drv, lock})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	upErr := m.Up()
	// The lock goes before m closes, which closes sqlDB too. The driver
	// holds a connection of sqlDB's, which sqlDB.Close leaves open while it
	// is held: closing m gives it back (and the source).
	released = true
	relErr := lock.release()
	m.Close()
	switch {
	case lock.lostErr() != nil:
		return lock.lostErr()
	case upErr != nil && !errors.Is(upErr, migrate.ErrNoChange):
		return fmt.Errorf("migrate: up: %w", upErr)
	}
	return relErr
}

// leasedDriver is golang-migrate's driver with its lock left to ours. It
// starts no migration once the lock is lost: golang-migrate marks a version
// dirty before it runs it, and that is where it refuses, so the migration
// under way finishes and none follows. (golang-migrate's GracefulStop would
// do the same but races with itself.)
type leasedDriver struct {
	database.Driver
	lock *migrationLock
}

func (leasedDriver) Lock() error   { return nil }
func (leasedDriver) Unlock() error { return nil }

func (d leasedDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		if err := d.lock.lostErr(); err != nil {
			return err
		}
	}
	return d.Driver.SetVersion(version, dirty)
}

// The lock's table, made by the migrator like golang-migrate's version
// table. One row while a migrator holds the lock; expires_at is the end of
// its lease, renewed while it migrates.
const migrationLockTable = `CREATE TABLE IF NOT EXISTS tally_migration_lock (
    name        TEXT        NOT NULL PRIMARY KEY,
    token       TEXT        NOT NULL,
    holder      TEXT        NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
)`

// migrationLock is a held migration lock and the renewal of its lease.
type migrationLock struct {
	db    *sql.DB
	token string
	lease time.Duration
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	lost error
}

// takeMigrationLock waits for the migration lock up to o.LockWait and
// holds it, renewing its lease, until release.
func takeMigrationLock(ctx context.Context, sqlDB *sql.DB, o MigrateOptions) (*migrationLock, error) {
	if err := ensureMigrationLockTable(ctx, sqlDB); err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	l := &migrationLock{db: sqlDB, token: hex.EncodeToString(b), lease: o.Lease,
		stop: make(chan struct{}), done: make(chan struct{})}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.LockWait)
	defer cancel()
	waiting := false
	var holder string
	var since, until time.Time
	for {
		// Who holds it, if anyone: for the log and the error.
		var lapsed bool
		err := sqlDB.QueryRowContext(ctx, `SELECT holder, acquired_at, expires_at, expires_at < now()
			FROM tally_migration_lock WHERE name = 'migrate'`).Scan(&holder, &since, &until, &lapsed)
		if errors.Is(err, sql.ErrNoRows) {
			holder, err = "", nil
		}
		if err == nil {
			// A held lock is left alone; a lapsed one is taken over.
			err = sqlDB.QueryRowContext(ctx, `INSERT INTO tally_migration_lock (name, token, holder, acquired_at, expires_at)
				VALUES ('migrate', $1, $2, now(), now() + $3::INT8 * INTERVAL '1 millisecond')
				ON CONFLICT (name) DO UPDATE SET token = excluded.token, holder = excluded.holder,
					acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
				WHERE tally_migration_lock.expires_at < now()
				RETURNING token`, l.token, o.Holder, o.Lease.Milliseconds()).Scan(new(string))
			if err == nil {
				if holder != "" && lapsed {
					o.Log.Warn("migrate: took over the migration lock, whose lease had lapsed (its migrator died or lost the database)",
						"previous_holder", holder, "lapsed_at", until)
				} else if waiting {
					o.Log.Info("migrate: took the migration lock", "holder", o.Holder)
				}
				go l.renew()
				return l, nil
			}
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, sql.ErrNoRows): // held
			if holder != "" && !waiting {
				waiting = true
				o.Log.Info("migrate: waiting for the migration lock", "holder", holder, "since", since,
					"lease_until", until, "wait", o.LockWait)
			}
		case retryableLockErr(err):
		default:
			return nil, db.Classify(fmt.Errorf("migrate: take the migration lock: %w", err))
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	if holder == "" || parent.Err() != nil {
		return nil, fmt.Errorf("migrate: take the migration lock: %w", ctx.Err())
	}
	return nil, fmt.Errorf("migrate: %w: %s has held it since %s (its lease runs to %s unless renewed); waited %s",
		ErrMigrationLocked, holder, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), o.LockWait)
}

// lockPoll is how often a waiting migrator tries the lock again.
const lockPoll = 200 * time.Millisecond

// retryableLockErr is an error of taking the lock that the next try may
// not meet: a serialization failure or deadlock between two migrators
// taking it at once.
func retryableLockErr(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40001" || pg.Code == "40P01" || pg.Code == "23505")
}

// ensureMigrationLockTable makes the lock's table. Two migrators making it
// at once can collide on PostgreSQL's catalog (23505, 42P07) even with IF
// NOT EXISTS: the second try finds it made.
func ensureMigrationLockTable(ctx context.Context, sqlDB *sql.DB) error {
	var err error
	for range 3 {
		if _, err = sqlDB.ExecContext(ctx, migrationLockTable); err == nil {
			return nil
		}
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || (pg.Code != "23505" && pg.Code != "42P07" && pg.Code != "40001") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return db.Classify(fmt.Errorf("migrate: make the migration lock's table: %w", err))
}

// clearCockroachLockRow deletes the lock row of golang-migrate's
// CockroachDB driver, if its table is there.
func clearCockroachLockRow(ctx context.Context, sqlDB *sql.DB) error {
	var name string
	if err := sqlDB.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		return db.Classify(fmt.Errorf("migrate: %w", err))
	}
	id, err := database.GenerateAdvisoryLockId(name)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, err = sqlDB.ExecContext(ctx, `DELETE FROM `+cockroachdb.DefaultLockTable+` WHERE lock_id = $1`, id)
	var pg *pgconn.PgError
	if err != nil && !(errors.As(err, &pg) && pg.Code == "42P01") { // 42P01: no such table yet
		return db.Classify(fmt.Errorf("migrate: clear the CockroachDB driver's lock row: %w", err))
	}
	return nil
}

// renew extends the lease every third of it until release. When it cannot
// for a whole lease (the database unreachable), another migrator may have
// taken the lock: the lock is lost, and this migrator stops after the
// migration under way (leasedDriver).
func (l *migrationLock) renew() {
	defer close(l.done)
	t := time.NewTicker(l.lease / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.lease/3)
		res, err := l.db.ExecContext(ctx, `UPDATE tally_migration_lock SET expires_at = now() + $2::INT8 * INTERVAL '1 millisecond'
			WHERE name = 'migrate' AND token = $1`, l.token, l.lease.Milliseconds())
		cancel()
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err == nil && n == 1:
			renewed = time.Now()
			continue
		case err == nil:
			l.lose(fmt.Errorf("migrate: %w: another migrator took over this one's lapsed lease", ErrMigrationLocked))
			return
		case time.Since(renewed) >= l.lease:
			l.lose(fmt.Errorf("migrate: %w: its lease could not be renewed for %s: %v", ErrMigrationLocked, l.lease, err))
			return
		}
	}
}

func (l *migrationLock) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = err
}

func (l *migrationLock) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// release stops the renewal and gives the lock up, if this migrator still
// holds it.
func (l *migrationLock) release() error {
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.db.ExecContext(ctx, `DELETE FROM tally_migration_lock WHERE name = 'migrate' AND token = $1`, l.token); err != nil {
		return db.Classify(fmt.Errorf("migrate: release the migration lock (it lapses by itself): %w", err))
	}
	return nil
}
