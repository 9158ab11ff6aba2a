package dbschema_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tallyhq/tally/internal/dbschema"
)

// lockedBuffer is a log both a migrator and the test touch.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two migrators at once: the second waits for the first's lock, saying who
// holds it, and finds the migrations done; one that may not wait so long
// fails naming the holder. Each migration runs once.
func TestMigratorWaitsForTheLockAndSaysWhoHoldsIt(t *testing.T) {
	pool := open(t)
	url := pool.Config().ConnString()
	ctx := context.Background()
	fsys := fstest.MapFS{
		"m/1_runs.up.sql":   {Data: []byte(`CREATE TABLE runs (n INT8 NOT NULL);`)},
		"m/1_runs.down.sql": {Data: []byte(`DROP TABLE runs;`)},
		// Slow enough for the others to meet the lock.
		"m/2_run.up.sql":   {Data: []byte(`INSERT INTO runs (n) VALUES (1); SELECT pg_sleep(1.5);`)},
		"m/2_run.down.sql": {Data: []byte(`DELETE FROM runs WHERE n = 1;`)},
	}
	errA := make(chan error, 1)
	go func() {
		errA <- dbschema.MigrateWith(ctx, url, fsys, "m", dbschema.MigrateOptions{Holder: "migrator A", Lease: time.Second})
	}()
	// A holds the lock once its row names it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var holder string
		err := pool.QueryRow(ctx, `SELECT holder FROM tally_migration_lock WHERE name = 'migrate'`).Scan(&holder)
		if err == nil && holder == "migrator A" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("migrator A never took the lock (last: %q, %v)", holder, err)
		}
	}

	start := time.Now()
	err := dbschema.MigrateWith(ctx, url, fsys, "m", dbschema.MigrateOptions{Holder: "migrator B", LockWait: 300 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&lockedBuffer{}, nil))})
	if !errors.Is(err, dbschema.ErrMigrationLocked) || !strings.Contains(err.Error(), "migrator A has held it since") {
		t.Fatalf("B: %v, want ErrMigrationLocked naming migrator A", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("B gave up after %v, want its 300ms wait", d)
	}

	var logC lockedBuffer
	errC := dbschema.MigrateWith(ctx, url, fsys, "m", dbschema.MigrateOptions{Holder: "migrator C", LockWait: 30 * time.Second,
		Log: slog.New(slog.NewTextHandler(&logC, nil))})
	if errC != nil {
		t.Fatalf("C: %v", errC)
	}
	if err := <-errA; err != nil {
		t.Fatalf("A: %v", err)
	}
	if s := logC.String(); !strings.Contains(s, "waiting for the migration lock") || !strings.Contains(s, `holder="migrator A"`) {
		t.Errorf("C's log does not say it waited for A:\n%s", s)
	}
	var runs, locks int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM tally_migration_lock)`).
		Scan(&runs, &locks); err != nil {
		t.Fatal(err)
	}
	if runs != 1 || locks != 0 {
		t.Fatalf("migration 2 ran %d times, %d lock rows left; want 1 and 0", runs, locks)
	}
}

// A migrator killed while it held the lock leaves the row behind, whose
// lease nobody renews: the next migrator takes it over when it lapses,
// saying whose it was, instead of waiting for ever.
func TestKilledMigratorsLockLapses(t *testing.T) {
	pool := open(t)
	url := pool.Config().ConnString()
	ctx := context.Background()
	fsys := fstest.MapFS{
		"m/1_things.up.sql":   {Data: []byte(`CREATE TABLE things (id TEXT NOT NULL PRIMARY KEY);`)},
		"m/1_things.down.sql": {Data: []byte(`DROP TABLE things;`)},
	}
	// The lock's table is made by the first migrator.
	if err := dbschema.Migrate(ctx, url, fsys, "m"); err != nil {
		t.Fatal(err)
	}
	fsys["m/2_more.up.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE more (id TEXT NOT NULL PRIMARY KEY);`)}
	fsys["m/2_more.down.sql"] = &fstest.MapFile{Data: []byte(`DROP TABLE more;`)}
	if _, err := pool.Exec(ctx, `INSERT INTO tally_migration_lock (name, token, holder, acquired_at, expires_at)
		VALUES ('migrate', 'gone', 'host old pid 1', now() - INTERVAL '1 minute', now() + INTERVAL '1 second')`); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	start := time.Now()
	if err := dbschema.MigrateWith(ctx, url, fsys, "m", dbschema.MigrateOptions{LockWait: 20 * time.Second,
		Log: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 10*time.Second {
		t.Errorf("took %v, want about the second the dead lease had left", d)
	}
	if s := log.String(); !strings.Contains(s, "took over the migration lock") || !strings.Contains(s, `previous_holder="host old pid 1"`) {
		t.Errorf("the log does not say whose lock was taken over:\n%s", s)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO more VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
}

// A migrator whose lease another took over (it could not renew it) stops
// after the migration under way and says so.
func TestMigratorThatLostItsLockStops(t *testing.T) {
	pool := open(t)
	url := pool.Config().ConnString()
	ctx := context.Background()
	fsys := fstest.MapFS{
		"m/1_slow.up.sql":     {Data: []byte(`CREATE TABLE slow (id TEXT NOT NULL PRIMARY KEY); SELECT pg_sleep(1);`)},
		"m/1_slow.down.sql":   {Data: []byte(`DROP TABLE slow;`)},
		"m/2_after.up.sql":    {Data: []byte(`CREATE TABLE after (id TEXT NOT NULL PRIMARY KEY);`)},
		"m/2_after.down.sql":  {Data: []byte(`DROP TABLE after;`)},
		"m/3_after2.up.sql":   {Data: []byte(`CREATE TABLE after2 (id TEXT NOT NULL PRIMARY KEY);`)},
		"m/3_after2.down.sql": {Data: []byte(`DROP TABLE after2;`)},
	}
	errA := make(chan error, 1)
	go func() {
		errA <- dbschema.MigrateWith(ctx, url, fsys, "m", dbschema.MigrateOptions{Holder: "migrator A", Lease: 300 * time.Millisecond})
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Another takes A's lock from under it, as one would whose clock
		// saw A's lease lapse.
		tag, err := pool.Exec(ctx, `UPDATE tally_migration_lock SET token = 'thief', holder = 'migrator T' WHERE name = 'migrate'`)
		if err == nil && tag.RowsAffected() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("migrator A never took the lock: %v", err)
		}
	}
	err := <-errA
	if !errors.Is(err, dbschema.ErrMigrationLocked) || !strings.Contains(err.Error(), "took over") {
		t.Fatalf("A: %v, want ErrMigrationLocked: another took over", err)
	}
	var slow, after *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass('slow')::TEXT, to_regclass('after')::TEXT`).Scan(&slow, &after); err != nil {
		t.Fatal(err)
	}
	if slow == nil || after != nil {
		t.Errorf("tables slow %v, after %v: want the migration under way done and no other", slow, after)
	}
	var holder string
	if err := pool.QueryRow(ctx, `SELECT holder FROM tally_migration_lock WHERE name = 'migrate'`).Scan(&holder); err != nil || holder != "migrator T" {
		t.Errorf("the lock is %q (%v), want left to migrator T", holder, err)
	}
}
