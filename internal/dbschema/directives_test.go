package dbschema_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/tenancy"
)

var migrationSets = []struct {
	name string
	fsys fs.FS
	dir  string
}{
	{"tenancy", tenancy.Migrations, tenancy.MigrationsDir},
	{"regional", regional.Migrations, regional.MigrationsDir},
}

// hashSharded is what {{hash_sharded}} becomes on CockroachDB.
var hashSharded = fmt.Sprintf("USING HASH WITH (bucket_count = %d)", dbschema.HashShardBuckets)

// Every migration file renders for both dialects: on CockroachDB each
// directive is a hash-sharded key's USING HASH, right where it stood; on
// PostgreSQL it is gone and the rest of the file is what was written. (The
// migration tests of every package apply the PostgreSQL rendering.)
func TestEveryMigrationRendersForBothDialects(t *testing.T) {
	directive := regexp.MustCompile(`\{\{\s*hash_sharded\s*\}\}`)
	pathOps := regexp.MustCompile(`\{\{\s*jsonb_path_ops\s*\}\}`)
	total, totalPathOps := 0, 0
	for _, set := range migrationSets {
		entries, err := fs.ReadDir(set.fsys, set.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := fs.ReadFile(set.fsys, path.Join(set.dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			raw := string(b)
			n := len(directive.FindAllString(raw, -1))
			total += n
			totalPathOps += len(pathOps.FindAllString(raw, -1))
			crdb, err := dbschema.Render(raw, db.CockroachDB)
			if err != nil {
				t.Fatalf("%s/%s on CockroachDB: %v", set.name, e.Name(), err)
			}
			pg, err := dbschema.Render(raw, db.PostgreSQL)
			if err != nil {
				t.Fatalf("%s/%s on PostgreSQL: %v", set.name, e.Name(), err)
			}
			if strings.Contains(crdb, "{{") || strings.Contains(pg, "{{") {
				t.Errorf("%s/%s: a directive is left after rendering", set.name, e.Name())
			}
			if got := strings.Count(crdb, hashSharded); got != n {
				t.Errorf("%s/%s on CockroachDB: %d × %q for %d directives", set.name, e.Name(), got, hashSharded, n)
			}
			if want := pathOps.ReplaceAllString(directive.ReplaceAllString(raw, hashSharded), ""); crdb != want {
				t.Errorf("%s/%s on CockroachDB: rendered other than its directives:\n%s", set.name, e.Name(), crdb)
			}
			if strings.Contains(pg, "USING HASH") || pg != pathOps.ReplaceAllString(directive.ReplaceAllString(raw, ""), "jsonb_path_ops") {
				t.Errorf("%s/%s on PostgreSQL: rendered other than without its directives:\n%s", set.name, e.Name(), pg)
			}
			if strings.Count(crdb, "\n") != strings.Count(raw, "\n") {
				t.Errorf("%s/%s: rendering moved lines", set.name, e.Name())
			}
		}
	}
	if total == 0 || totalPathOps == 0 {
		t.Fatal("no migration carries {{hash_sharded}} or {{jsonb_path_ops}}")
	}
	// One rendering, spelled out.
	got, err := dbschema.Render("CREATE TABLE t (project_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (project_id, id) {{hash_sharded}});\n"+
		"CREATE INDEX t_by_id ON t (id) {{ hash_sharded }} WHERE id <> '';", db.CockroachDB)
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE t (project_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (project_id, id) USING HASH WITH (bucket_count = 8));\n" +
		"CREATE INDEX t_by_id ON t (id) USING HASH WITH (bucket_count = 8) WHERE id <> '';"
	if got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
}

// A directive the migrator does not know fails the file, on either
// dialect, naming it: nothing is applied half-rendered.
func TestAnUnknownDirectiveFailsTheMigration(t *testing.T) {
	for _, d := range []db.Dialect{db.PostgreSQL, db.CockroachDB} {
		_, err := dbschema.Render("CREATE TABLE t (id TEXT NOT NULL, PRIMARY KEY (id) {{hashed}});", d)
		if err == nil || !strings.Contains(err.Error(), "{{hashed}}") {
			t.Errorf("%v: %v, want an error naming {{hashed}}", d, err)
		}
	}
	pool := open(t)
	fsys := fstest.MapFS{
		"m/1_t.up.sql":   {Data: []byte(`CREATE TABLE t (id TEXT NOT NULL, PRIMARY KEY (id) {{hashed}});`)},
		"m/1_t.down.sql": {Data: []byte(`DROP TABLE t;`)},
	}
	err := dbschema.Migrate(context.Background(), pool.Config().ConnString(), fsys, "m")
	if err == nil || !strings.Contains(err.Error(), "1_t.up.sql") || !strings.Contains(err.Error(), "{{hashed}}") {
		t.Fatalf("migrate: %v, want the file and its directive named", err)
	}
}

// The migrator renders the directive for the server it migrates: on
// PostgreSQL a plain key; on CockroachDB (TALLY_COCKROACH_BINARY) a
// hash-sharded one.
func TestMigrateRendersTheDirectiveForItsServer(t *testing.T) {
	pool := open(t)
	ctx := context.Background()
	fsys := fstest.MapFS{
		"m/1_t.up.sql": {Data: []byte(`CREATE TABLE t (project_id TEXT NOT NULL, id TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}});
CREATE INDEX t_by_time ON t (project_id, at) {{hash_sharded}};`)},
		"m/1_t.down.sql": {Data: []byte(`DROP TABLE t;`)},
	}
	if err := dbschema.Migrate(ctx, pool.Config().ConnString(), fsys, "m"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := pool.Exec(ctx, `INSERT INTO t (project_id, id, at) VALUES ('p', $1, now())`, fmt.Sprintf("x%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A keyset page reads back in id order either way.
	rows, err := pool.Query(ctx, `SELECT id FROM t WHERE project_id = 'p' AND id > 'x04' ORDER BY id LIMIT 3`)
	if err != nil {
		t.Fatal(err)
	}
	var page []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		page = append(page, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(page, ",") != "x05,x06,x07" {
		t.Fatalf("page after x04: %v", page)
	}
	if dbtest.Engine() != "cockroachdb" {
		return
	}
	var create string
	if err := pool.QueryRow(ctx, `SELECT create_statement FROM [SHOW CREATE TABLE t]`).Scan(&create); err != nil {
		t.Fatal(err)
	}
	if strings.Count(create, "USING HASH") != 2 {
		t.Fatalf("CockroachDB made\n%s\nwithout a hash-sharded key and index", create)
	}
}

// The database rules (docs/architecture.md) list the keys that are
// hash-sharded, with why; the migrations shard exactly those.
func TestTheDocumentedShardedKeysAreTheMigrations(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "<!-- hash-sharded keys -->")
	end := strings.Index(doc, "<!-- /hash-sharded keys -->")
	if start < 0 || end < start {
		t.Fatal("docs/architecture.md has no <!-- hash-sharded keys --> … <!-- /hash-sharded keys --> list")
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^[ \t]*\\| `([a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(doc[start:end], -1) {
		documented[m[1]] = true
	}
	if len(documented) == 0 {
		t.Fatal("the documented list of hash-sharded keys is empty")
	}
	sharded := map[string]bool{}
	table := regexp.MustCompile(`(?s)CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+) \((.*?)\n\);`)
	pk := regexp.MustCompile(`PRIMARY KEY \([^)]*\) \{\{hash_sharded\}\}`)
	index := regexp.MustCompile(`CREATE (?:UNIQUE )?INDEX ([a-z_]+)\s+ON [a-z_]+ \([^;]*\) \{\{hash_sharded\}\}`)
	for _, set := range migrationSets {
		entries, err := fs.ReadDir(set.fsys, set.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".up.sql") {
				continue
			}
			b, err := fs.ReadFile(set.fsys, path.Join(set.dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			sql := string(b)
			n := 0
			for _, m := range table.FindAllStringSubmatch(sql, -1) {
				if pk.MatchString(m[2]) {
					sharded[m[1]] = true
					n++
				}
			}
			for _, m := range index.FindAllStringSubmatch(sql, -1) {
				sharded[m[1]] = true
				n++
			}
			if all := strings.Count(sql, "{{hash_sharded}}"); all != n {
				t.Errorf("%s/%s: %d directives, %d of them found on a table's primary key or an index", set.name, e.Name(), all, n)
			}
		}
	}
	var missing, undocumented []string
	for k := range documented {
		if !sharded[k] {
			missing = append(missing, k)
		}
	}
	for k := range sharded {
		if !documented[k] {
			undocumented = append(undocumented, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(undocumented)
	if len(missing) > 0 {
		t.Errorf("documented as hash-sharded, without {{hash_sharded}} in its migration: %v", missing)
	}
	if len(undocumented) > 0 {
		t.Errorf("hash-sharded by a migration, not in the documented list: %v", undocumented)
	}
}
