// Package runbooks_test tries the operations runbooks of this folder on the
// project's own test databases.
package runbooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/pglocal"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/metaschemas"
	"github.com/tallyhq/tally/regional/webhooks"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The backup and restore commands of restore.md's "Tried on PostgreSQL",
// written with the runbook's shell variables; the test checks the runbook
// shows them exactly so, then runs them with the variables filled in.
var (
	dumpArgs    = []string{"--format=custom", "--no-owner", "--no-privileges", "--file=regional.dump", "$OLD_URL"}
	restoreArgs = []string{"--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", "--dbname=$NEW_URL", "regional.dump"}
)

// TestRestoreRunbookOnPostgreSQL runs steps 3 to 5 of restore.md on
// PostgreSQL: a regional database with customers written by the regional
// code is backed up with pg_dump, restored with pg_restore into a new
// database, and the restored one has the rows of the backup (not those
// written after it) and migrations up to date.
func TestRestoreRunbookOnPostgreSQL(t *testing.T) {
	if dbtest.Engine() != "postgres" {
		t.Skip("pg_dump and pg_restore are PostgreSQL's; CockroachDB restores with RESTORE DATABASE … FROM LATEST IN 's3://…' (restore.md), which needs the object storage its backups are in")
	}
	doc, err := os.ReadFile("restore.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{"pg_dump": dumpArgs, "pg_restore": restoreArgs} {
		if line := name + " " + shellLine(args); !bytes.Contains(doc, []byte(line)) {
			t.Fatalf("restore.md does not show the command this test runs:\n%s", line)
		}
	}
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := dbtest.Shared(t, "restore")
	migrate := func(ctx context.Context, url string) error {
		return dbschema.Migrate(ctx, url, regional.Migrations, regional.MigrationsDir)
	}
	oldURL, err := srv.NewMigratedDatabase(ctx, "regional", migrate)
	if err != nil {
		t.Fatal(err)
	}
	const project = "proj_restore"
	old := customerService(t, oldURL)
	for _, c := range []string{`{"source_id":"c-1","name":"Ann","email":"ann@example.com"}`,
		`{"source_id":"c-2","name":"Bo","metadata":{"tier":"gold"}}`, `{"source_id":"c-3","name":"Cy"}`} {
		upsert(t, ctx, old, project, c)
	}

	// Step 3: the backup, then a write after it, which the restore must not have.
	dump := filepath.Join(t.TempDir(), "regional.dump")
	vars := map[string]string{"$OLD_URL": oldURL, "regional.dump": dump}
	run(t, ctx, pgDump, fill(dumpArgs, vars))
	upsert(t, ctx, old, project, `{"source_id":"c-late","name":"After the backup"}`)

	newURL := srv.NewDatabase(t) // CREATE DATABASE $NEW_DB
	vars["$NEW_URL"] = newURL
	run(t, ctx, pgRestore, fill(restoreArgs, vars))

	// The restored database has the same tables as the one backed up.
	if o, n := tables(t, ctx, oldURL), tables(t, ctx, newURL); !slices.Equal(o, n) {
		t.Fatalf("restored tables differ:\nbacked up: %v\nrestored:  %v", o, n)
	}

	// Step 5: migrations report up to date, and migrating again changes nothing.
	newest := newestMigration(t)
	version, dirty := migrationVersion(t, ctx, newURL)
	if version != newest || dirty {
		t.Fatalf("restored schema_migrations: version %d dirty %v; want version %d, clean", version, dirty, newest)
	}
	if err := migrate(ctx, newURL); err != nil {
		t.Fatalf("tally migrate on the restored database: %v", err)
	}
	if v, d := migrationVersion(t, ctx, newURL); v != newest || d {
		t.Fatalf("after migrate: version %d dirty %v", v, d)
	}

	// The rows, read back through the regional code.
	restored := customerService(t, newURL)
	want := map[string]string{"c-1": "Ann", "c-2": "Bo", "c-3": "Cy"}
	for src, name := range want {
		c, err := restored.Get(ctx, project, src)
		if err != nil {
			t.Fatalf("customer %s in the restored database: %v", src, err)
		}
		if c.Attrs.Name == nil || *c.Attrs.Name != name {
			t.Fatalf("customer %s restored with name %v, want %s", src, c.Attrs.Name, name)
		}
	}
	if c, err := restored.Get(ctx, project, "c-2"); err != nil || c.Attrs.Metadata["tier"] != "gold" {
		t.Fatalf("customer c-2's metadata: %v %v", c.Attrs.Metadata, err)
	}
	if _, err := restored.Get(ctx, project, "c-late"); err == nil {
		t.Fatal("the customer written after the backup is in the restored database")
	}
	if _, err := old.Get(ctx, project, "c-late"); err != nil {
		t.Fatalf("the original database lost the customer written after the backup: %v", err)
	}
	// And the restored database takes writes.
	upsert(t, ctx, restored, project, `{"source_id":"c-4","name":"Di"}`)
}

// shellLine writes args as restore.md does: the URL variables in quotes.
func shellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, v := range []string{"$OLD_URL", "$NEW_URL"} {
			a = strings.ReplaceAll(a, v, `"`+v+`"`)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// fill replaces the runbook's variables in args with their values.
func fill(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, k, v)
		}
		out[i] = a
	}
	return out
}

// pgTool finds a PostgreSQL client program next to the server's initdb, as
// pglocal finds the server (pg_dump must be of the server's major version or
// newer, which the one installed with it is), else on PATH.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	if dir, err := pglocal.Find(); err == nil {
		if p := filepath.Join(dir, name); isFile(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("%s not found next to PostgreSQL's initdb nor on PATH: install PostgreSQL's client programs (Debian: postgresql-client, which the postgresql package pulls in)", name)
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func run(t *testing.T, ctx context.Context, prog string, args []string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(prog), strings.Join(args, " "), err, out)
	}
}

type noNotices struct{}

func (noNotices) Emit(context.Context, db.Querier, webhooks.Notice) error { return nil }

func (noNotices) Queue(context.Context, *pgx.Batch, webhooks.Notice) error { return nil }

func customerService(t *testing.T, url string) *customers.Service {
	t.Helper()
	pool, err := db.Open(context.Background(), url, db.Options{Name: "restore-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return customers.NewService(pool, noNotices{}, (*metaschemas.Checker)(nil), nil, customers.Erasers{})
}

func upsert(t *testing.T, ctx context.Context, svc *customers.Service, project, body string) {
	t.Helper()
	var p customers.Patch
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Upsert(ctx, project, &p); err != nil {
		t.Fatalf("upsert %s: %v", body, err)
	}
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// tables lists the tables of the public schema, sorted.
func tables(t *testing.T, ctx context.Context, url string) []string {
	t.Helper()
	rows, err := connect(t, ctx, url).Query(ctx,
		"SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("no tables in %s", url)
	}
	return names
}

func migrationVersion(t *testing.T, ctx context.Context, url string) (int, bool) {
	t.Helper()
	var version int
	var dirty bool
	err := connect(t, ctx, url).QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		t.Fatal("schema_migrations is empty")
	}
	if err != nil {
		t.Fatal(err)
	}
	return version, dirty
}

// newestMigration is the highest version among regional/migrations' files.
func newestMigration(t *testing.T) int {
	t.Helper()
	files, err := fs.ReadDir(regional.Migrations, regional.MigrationsDir)
	if err != nil {
		t.Fatal(err)
	}
	newest := 0
	for _, f := range files {
		n, _, ok := strings.Cut(f.Name(), "_")
		if v, err := strconv.Atoi(n); ok && err == nil && v > newest {
			newest = v
		}
	}
	if newest == 0 {
		t.Fatal("no migrations in regional/migrations")
	}
	return newest
}
