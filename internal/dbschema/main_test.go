package dbschema_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func open(t *testing.T) *db.Pool { return dbtest.OpenPool(t, "main") }

func TestMigrateAppliesEmbeddedFilesOnce(t *testing.T) {
	pool := open(t)
	url := pool.Config().ConnString()
	fsys := fstest.MapFS{
		"m/1_init.up.sql":   {Data: []byte(`CREATE TABLE things (project_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (project_id, id));`)},
		"m/1_init.down.sql": {Data: []byte(`DROP TABLE things;`)},
	}
	for i := 0; i < 2; i++ {
		if err := dbschema.Migrate(context.Background(), url, fsys, "m"); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO things VALUES ('p', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Each run closes what it opened: no connection to the database is
	// left but the pool's (a backend ends shortly after its client goes).
	leaked := 0
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).
			Scan(&n); err != nil {
			t.Fatal(err)
		}
		if leaked = n - int(pool.Stat().TotalConns()); leaked <= 0 || time.Now().After(deadline) {
			break
		}
	}
	if leaked > 0 {
		t.Fatalf("%d connections left open by the migrations", leaked)
	}
}
