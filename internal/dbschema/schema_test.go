package dbschema_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMigrationsVersionIsTheHighestNumber(t *testing.T) {
	fsys := fstest.MapFS{
		"m/1_a.up.sql":  {Data: []byte(`SELECT 1`)},
		"m/2_b.up.sql":  {Data: []byte(`SELECT 1`)},
		"m/10_c.up.sql": {Data: []byte(`SELECT 1`)}, // after 2, though before it by name
		"m/9_d.up.sql":  {Data: []byte(`SELECT 1`)},
	}
	if v, err := dbschema.MigrationsVersion(fsys, "m"); err != nil || v != 10 {
		t.Fatalf("MigrationsVersion: %d %v, want 10", v, err)
	}
	if _, err := dbschema.MigrationsVersion(fstest.MapFS{"m/readme.txt": {}}, "m"); err == nil {
		t.Fatal("no migrations: no error")
	}
}

// A binary whose migrations go further than its database's schema is not
// ready until the database is migrated, a dirty version being one whose
// migration did not finish; a schema found behind is read again only after
// Every, and one found good never again.
func TestSchemaGateWaitsForTheMigrationItNeeds(t *testing.T) {
	ctx := context.Background()
	url := dbtest.Shared(t, "main").NewDatabase(t)
	pool, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	old := fstest.MapFS{
		"m/1_a.up.sql":   {Data: []byte(`CREATE TABLE a (id INT8 PRIMARY KEY)`)},
		"m/1_a.down.sql": {Data: []byte(`DROP TABLE a`)},
		"m/2_b.up.sql":   {Data: []byte(`CREATE TABLE b (id INT8 PRIMARY KEY)`)},
		"m/2_b.down.sql": {Data: []byte(`DROP TABLE b`)},
	}
	with := func(fsys fstest.MapFS, name, up string) fstest.MapFS {
		n := fstest.MapFS{}
		for k, v := range fsys {
			n[k] = v
		}
		n["m/"+name+".up.sql"] = &fstest.MapFile{Data: []byte(up)}
		return n
	}
	newer := with(old, "3_c", `CREATE TABLE c (id INT8 PRIMARY KEY)`)
	const every = time.Second
	g := dbschema.NewGate(pool, newer, "m", dbschema.GateOptions{Name: "the test database", Fix: "migrate it", Every: every})
	if g.Need() != 3 {
		t.Fatalf("Need %d, want 3", g.Need())
	}
	behind := func(version uint, dirty bool) {
		t.Helper()
		err := g.Check(ctx)
		var be *dbschema.BehindError
		if !errors.Is(err, dbschema.ErrBehind) || !errors.As(err, &be) || be.Version != version || be.Dirty != dirty || be.Need != 3 {
			t.Fatalf("Check: %v, want behind at version %d (dirty %v)", err, version, dirty)
		}
		if g.Good() {
			t.Fatal("Good while behind")
		}
	}
	// Never migrated: no version table.
	refused := time.Now()
	behind(0, false)
	if err := g.Check(ctx); err.Error() != "the test database's schema is at version 0, this binary needs 3: migrate it" {
		t.Fatalf("message: %q", err)
	}
	// The old release's migrations: behind still, and seen so only once
	// the last answer is older than every.
	if err := dbschema.Migrate(ctx, url, old, "m"); err != nil {
		t.Fatal(err)
	}
	if time.Since(refused) < every-100*time.Millisecond {
		behind(0, false) // remembered (unless the migration took longer than every, on a loaded machine)
	}
	time.Sleep(every)
	behind(2, false)
	// The new release's migration failing leaves its version dirty.
	if err := dbschema.Migrate(ctx, url, with(old, "3_c", `CREATE TABLE c (id INT8 PRIMARY KEY`), "m"); err == nil {
		t.Fatal("a broken migration applied")
	}
	time.Sleep(every)
	behind(3, true)
	if err := g.Check(ctx); err.Error() != "the test database's schema is at version 3 (dirty: its migration failed or is under way), this binary needs 3: migrate it" {
		t.Fatalf("message: %q", err)
	}
	// Forced back, as an operator does, and migrated: good.
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET version = 2, dirty = false`); err != nil {
		t.Fatal(err)
	}
	if err := dbschema.Migrate(ctx, url, newer, "m"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(every)
	if err := g.Check(ctx); err != nil || !g.Good() {
		t.Fatalf("Check after the migration: %v (good %v)", err, g.Good())
	}
	// A schema only moves forward: once good, the table is not read again.
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET version = 1, dirty = true`); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatalf("Check once good read the table again: %v", err)
	}
	// A dirty version above the one needed has it: every migration before
	// the dirty one finished.
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET version = 4, dirty = true`); err != nil {
		t.Fatal(err)
	}
	if err := dbschema.NewGate(pool, newer, "m", dbschema.GateOptions{}).Check(ctx); err != nil {
		t.Fatalf("dirty 4, need 3: %v", err)
	}
	err = dbschema.NewGate(pool, with(newer, "4_d", `SELECT 1`), "m", dbschema.GateOptions{}).Check(ctx)
	if !errors.Is(err, dbschema.ErrBehind) {
		t.Fatalf("dirty 4, need 4: %v", err)
	}
}
