package dbschema_test

import (
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/tallyhq/tally/internal/dbschema"
)

func TestNamedTablesReadsEveryPlaceATableIsNamed(t *testing.T) {
	for _, c := range []struct {
		name, sql string
		want      []string
		isSQL     bool
	}{
		{"select with joins", `SELECT a.id FROM orders o JOIN customers c ON c.id = o.customer_id LEFT JOIN public.skus s ON true`, []string{"orders", "customers", "skus"}, true},
		{"comma list with aliases", `SELECT 1 FROM rewards AS r, reward_assignments ra WHERE r.id = ra.reward_id`, []string{"rewards", "reward_assignments"}, true},
		{"insert, upsert's update", `INSERT INTO orders (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET id = $1`, []string{"orders", "set"}, true},
		{"update, delete", "UPDATE ONLY vouchers SET x = 1;\nDELETE FROM bin_entries WHERE true", []string{"vouchers", "bin_entries"}, true},
		{"a fragment", ` JOIN campaigns c ON c.id = v.campaign_id`, []string{"campaigns"}, true},
		{"expressions are not tables", `SELECT EXTRACT(EPOCH FROM at), a IS DISTINCT FROM b FROM (SELECT 1) x`, []string{"at"}, true},
		{"quoted text is not SQL", `SELECT 'FROM orders' FROM "Skus"`, []string{"Skus"}, true},
		{"prose", `delete from the bin`, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			refs, isSQL := dbschema.NamedTables(c.sql)
			var got []string
			for _, r := range refs {
				got = append(got, r.Name)
			}
			if isSQL != c.isSQL || !reflect.DeepEqual(got, c.want) {
				t.Errorf("NamedTables(%q) = %v, %v; want %v, %v", c.sql, got, isSQL, c.want, c.isSQL)
			}
		})
	}
	refs, _ := dbschema.NamedTables("SELECT 1\n\nFROM orders")
	if len(refs) != 1 || refs[0].Line != 3 {
		t.Errorf("line of the name: %+v, want orders on 3", refs)
	}
}

func TestSchemaTablesFollowsRenamesAndDrops(t *testing.T) {
	fsys := fstest.MapFS{
		"m/1_a.up.sql":   {Data: []byte(`CREATE TABLE a (id INT8); CREATE TABLE IF NOT EXISTS b (id INT8);`)},
		"m/1_a.down.sql": {Data: []byte(`DROP TABLE b; DROP TABLE a;`)},
		"m/2_b.up.sql":   {Data: []byte(`ALTER TABLE a RENAME TO c; CREATE TABLE d (id INT8)`)},
		"m/10_c.up.sql":  {Data: []byte(`DROP TABLE IF EXISTS b, d`)},
	}
	got, err := dbschema.Tables(fsys, "m")
	if err != nil || !reflect.DeepEqual(got, []string{"c"}) {
		t.Fatalf("Tables = %v, %v; want [c]", got, err)
	}
}
