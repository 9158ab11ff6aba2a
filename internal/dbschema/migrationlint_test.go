package dbschema_test

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/tenancy"
)

// Every migration the services embed passes the linter: each applies on
// CockroachDB as well as on the PostgreSQL the tests run.
func TestMigrationsApplyOnCockroachDB(t *testing.T) {
	for _, set := range []struct {
		name string
		fsys fs.FS
		dir  string
	}{
		{"tenancy", tenancy.Migrations, tenancy.MigrationsDir},
		{"regional", regional.Migrations, regional.MigrationsDir},
	} {
		problems, err := dbschema.Lint(set.fsys, set.dir)
		if err != nil {
			t.Fatalf("%s: %v", set.name, err)
		}
		for _, p := range problems {
			t.Errorf("%s/%s", set.name, p)
		}
		// Versions run 1, 2, … N with no gap: a step down from N reaches
		// N-1, which the readiness check and its test count on, and helpers
		// working at once cannot leave a hole between their numbers.
		entries, err := fs.ReadDir(set.fsys, set.dir)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]int{}
		for _, e := range entries {
			var v int
			if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil {
				seen[v]++
			}
		}
		for v := 1; v <= len(seen); v++ {
			if seen[v] != 2 {
				t.Errorf("%s: version %d has %d files, want an up and a down (versions must run 1 to %d without a gap)", set.name, v, seen[v], len(seen))
			}
		}
	}
}

// The linter finds each pattern, in the files as they were before issue 34
// rewrote them among others, and lets the rewritten forms pass.
func TestLintMigrations(t *testing.T) {
	// What the directory holds before the file under test: the tables and
	// indexes it changes.
	const base = `CREATE TABLE projects (id TEXT NOT NULL PRIMARY KEY);
CREATE TABLE plans (name TEXT NOT NULL PRIMARY KEY);
CREATE TABLE skus (project_id TEXT NOT NULL, id TEXT NOT NULL, source_id TEXT NULL, bin_id TEXT NULL,
    PRIMARY KEY (project_id, id));
CREATE UNIQUE INDEX skus_live_source_id ON skus (project_id, source_id) WHERE bin_id IS NULL;
CREATE TABLE campaigns (project_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (project_id, id));
`
	for _, c := range []struct {
		name string
		sql  string
		want []string // a substring of each problem, in order; none: it passes
	}{
		{
			name: "tenancy 2: UPDATE of a column added earlier in the file",
			sql: `ALTER TABLE projects ADD COLUMN plan TEXT NOT NULL DEFAULT 'standard';
-- The secret webhooks are signed with.
ALTER TABLE projects ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '';
UPDATE projects SET webhook_secret = 'whsec_' || md5(random()::TEXT || id) WHERE webhook_secret = '';`,
			want: []string{"3: table projects, made before this file, is changed by 2 statements (lines 1, 3)",
				"4: UPDATE after a schema change (line 1)"},
		},
		{
			name: "tenancy 3: columns added, then set",
			sql: `ALTER TABLE plans ADD COLUMN requests_per_minute INT8 NOT NULL DEFAULT 0,
    ADD COLUMN requests_per_hour INT8 NOT NULL DEFAULT 0;
UPDATE plans SET requests_per_minute = 100, requests_per_hour = 1000 WHERE name = 'free';`,
			want: []string{"3: UPDATE after a schema change (line 1)"},
		},
		{
			name: "a table made and filled in one file",
			sql: `CREATE TABLE tiers (name TEXT NOT NULL PRIMARY KEY);
INSERT INTO tiers (name) VALUES ('gold');`,
			want: []string{"2: INSERT after a schema change (line 1)"},
		},
		{
			name: "a schema change after a write",
			sql: `UPDATE plans SET name = name WHERE name = 'free';
CREATE INDEX plans_by_name ON plans (name);`,
			want: []string{"2: schema change after a write (line 1)"},
		},
		{
			name: "regional 9: DROP INDEX, DROP COLUMN, CREATE UNIQUE INDEX",
			sql: `DROP INDEX skus_live_source_id CASCADE;
ALTER TABLE skus DROP COLUMN bin_id;
CREATE UNIQUE INDEX skus_source_id ON skus (project_id, source_id);`,
			want: []string{"2: DROP COLUMN beside another schema change",
				"2: table skus, made before this file, is changed by 3 statements (lines 1, 2, 3)"},
		},
		{
			name: "a DROP COLUMN beside a new table",
			sql: `CREATE TABLE other (id TEXT NOT NULL PRIMARY KEY);
ALTER TABLE skus DROP bin_id;`,
			want: []string{"2: DROP COLUMN beside another schema change"},
		},
		{
			name: "a DROP COLUMN and an ADD COLUMN in one statement",
			sql:  `ALTER TABLE skus DROP COLUMN bin_id, ADD COLUMN binned BOOL NOT NULL DEFAULT false;`,
			want: []string{"1: DROP COLUMN beside another schema change"},
		},
		{
			name: "regional 15: ADD COLUMN and an index on it",
			sql: `ALTER TABLE campaigns ADD COLUMN campaign_type TEXT NOT NULL DEFAULT 'LOYALTY_PROGRAM';
CREATE INDEX campaigns_by_type ON campaigns (project_id, campaign_type, id);`,
			want: []string{"2: table campaigns, made before this file, is changed by 2 statements"},
		},
		{
			name: "CockroachDB's table@index names the table",
			sql: `DROP INDEX skus@skus_live_source_id CASCADE;
CREATE UNIQUE INDEX skus_source_id ON skus (project_id, source_id);`,
			want: []string{"2: table skus, made before this file, is changed by 2 statements"},
		},
		{
			name: "regional 2: INT without width",
			sql: `CREATE TABLE outbox (
    id           TEXT        NOT NULL PRIMARY KEY,
    attempts     INT         NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL
);`,
			want: []string{"3: INT has no explicit width", "4: integer has no explicit width"},
		},
		{
			name: "SERIAL and BIGSERIAL",
			sql:  "CREATE TABLE a (id SERIAL PRIMARY KEY);\nCREATE TABLE b (id BIGSERIAL PRIMARY KEY);",
			want: []string{"1: SERIAL has no explicit width", "2: BIGSERIAL has no explicit width"},
		},
		{
			name: "a cast to INT in a data change",
			sql:  `UPDATE plans SET name = (length(name)::INT)::TEXT WHERE name = 'free';`,
			want: []string{"1: INT has no explicit width"},
		},
		{
			name: "DELETE without a bound",
			sql:  `DELETE FROM skus;`,
			want: []string{"1: DELETE without WHERE or LIMIT"},
		},
		{
			name: "DELETE in a common table expression",
			sql:  `WITH gone AS (DELETE FROM skus RETURNING id) SELECT count(*) FROM gone;`,
			want: []string{"1: DELETE without WHERE or LIMIT"},
		},
		{
			name: "TRUNCATE",
			sql:  `TRUNCATE skus;`,
			want: []string{"1: TRUNCATE in a migration"},
		},
		{
			name: "the rewritten files pass: several columns in one statement",
			sql: `-- A project's plan. INT and SERIAL in a comment are not SQL.
ALTER TABLE projects
    ADD COLUMN plan TEXT NOT NULL DEFAULT 'INT',
    ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '';`,
		},
		{
			name: "the rewritten files pass: new tables with their indexes and one change of an existing table",
			sql: `CREATE TABLE binned_skus (project_id TEXT NOT NULL, id TEXT NOT NULL, part INT4 NOT NULL,
    n INT8 NOT NULL, s SMALLINT NOT NULL, b BIGINT NOT NULL, "int" TEXT NULL, PRIMARY KEY (project_id, id));
CREATE INDEX binned_skus_by_part ON binned_skus (project_id, part);
CREATE INDEX campaigns_by_id ON campaigns (id);
/* a comment /* nested */ with INT */
COMMENT ON TABLE binned_skus IS 'INT';`,
		},
		{
			name: "the rewritten files pass: data only, bounded",
			sql: `INSERT INTO plans (name) VALUES ('free'), ('standard');
UPDATE plans SET name = name WHERE name = 'free';
DELETE FROM skus WHERE bin_id IS NOT NULL;
DELETE FROM plans WHERE name = $$it's 'INT'$$;`,
		},
		{
			name: "the directive passes after a primary key's and an index's column list",
			sql: `CREATE TABLE events (project_id TEXT NOT NULL, id TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, id) {{hash_sharded}}
);
CREATE INDEX events_by_time ON events (project_id, at) {{hash_sharded}};
CREATE UNIQUE INDEX events_live ON events (project_id, id) {{ hash_sharded }} WHERE at IS NOT NULL;
-- {{hash_sharded}} in a comment is nothing.
CREATE TABLE others (id TEXT NOT NULL, PRIMARY KEY (id) {{hash_sharded}}, at TIMESTAMPTZ NULL);`,
		},
		{
			name: "jsonb_path_ops passes after a GIN index's expression",
			sql:  `CREATE INDEX customers_by_metadata ON customers USING GIN ((attrs->'metadata') {{jsonb_path_ops}});`,
		},
		{
			name: "jsonb_path_ops in a btree index, or before another column",
			sql: `CREATE INDEX customers_by_attrs ON customers ((attrs->'metadata') {{jsonb_path_ops}});
CREATE INDEX products_by_both ON products USING GIN (attrs {{jsonb_path_ops}}, project_id);`,
			want: []string{"1: {{jsonb_path_ops}} goes after", "2: {{jsonb_path_ops}} goes after"},
		},
		{
			name: "an unknown directive",
			sql:  `CREATE TABLE a (id TEXT NOT NULL, PRIMARY KEY (id) {{hashed}});`,
			want: []string{"1: unknown directive {{hashed}}"},
		},
		{
			name: "the directive after a column's type, a UNIQUE constraint, a CHECK",
			sql: `CREATE TABLE a (
    id TEXT NOT NULL PRIMARY KEY {{hash_sharded}},
    b TEXT NOT NULL,
    UNIQUE (b) {{hash_sharded}},
    CHECK (b <> '') {{hash_sharded}}
);`,
			want: []string{"2: {{hash_sharded}} goes right after", "4: {{hash_sharded}} goes right after",
				"5: {{hash_sharded}} goes right after"},
		},
		{
			name: "the directive in an ALTER TABLE and a DROP INDEX",
			sql: `ALTER TABLE skus ADD CONSTRAINT k PRIMARY KEY (project_id, id) {{hash_sharded}};
DROP INDEX campaigns_by_type {{hash_sharded}};`,
			want: []string{"1: {{hash_sharded}} goes right after", "2: {{hash_sharded}} goes right after"},
		},
		{
			name: "the directive before INCLUDE, or with something after it in a primary key",
			sql: `CREATE INDEX skus_by_source ON skus (project_id, source_id) {{hash_sharded}} INCLUDE (bin_id);
CREATE TABLE a (id TEXT NOT NULL, PRIMARY KEY (id) {{hash_sharded}} WITH (fillfactor = 70));`,
			want: []string{"1: {{hash_sharded}} goes right after", "2: {{hash_sharded}} goes right after"},
		},
		{
			name: "the directive inside an index's expression, or twice",
			sql: `CREATE INDEX skus_by_lower ON skus (project_id, lower(source_id) {{hash_sharded}});
CREATE INDEX campaigns_twice ON campaigns (project_id, id) {{hash_sharded}} {{hash_sharded}};`,
			want: []string{"1: {{hash_sharded}} goes right after", "2: {{hash_sharded}} goes right after the column list of a PRIMARY KEY (…) in CREATE TABLE or of CREATE INDEX … ON t (…), and only WHERE",
				"2: {{hash_sharded}} goes right after the column list of a PRIMARY KEY (…) in CREATE TABLE or of CREATE INDEX … ON t (…); here it follows no"},
		},
		{
			name: "the rewritten files pass: a DROP COLUMN alone",
			sql:  `ALTER TABLE projects DROP COLUMN webhook_secret, DROP COLUMN plan;`,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"m/1_base.up.sql":   {Data: []byte(base)},
				"m/1_base.down.sql": {Data: []byte("SELECT 1;")},
				"m/2_case.up.sql":   {Data: []byte(c.sql)},
			}
			problems, err := dbschema.Lint(fsys, "m")
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(c.want) {
				t.Fatalf("problems:\n%s\nwant %d:\n%s", strings.Join(problems, "\n"), len(c.want), strings.Join(c.want, "\n"))
			}
			for i, p := range problems {
				if !strings.HasPrefix(p, "2_case.up.sql:") || !strings.Contains(p, c.want[i]) {
					t.Errorf("problem %d: %s\nwant 2_case.up.sql: … %s", i, p, c.want[i])
				}
			}
		})
	}
}
