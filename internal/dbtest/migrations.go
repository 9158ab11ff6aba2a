package dbtest

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tallyhq/tally/internal/dbschema"
)

// MigrationsBelowNeed is the migrations in dir of fsys but the last: a
// release before the binary's; and the binary's need (the readiness
// tests' older schema).
func MigrationsBelowNeed(t testing.TB, fsys fs.FS, dir string) (fstest.MapFS, uint) {
	t.Helper()
	need, err := dbschema.MigrationsVersion(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, e := range entries {
		n, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseUint(n, 10, 64); err != nil || uint(v) >= need {
			continue
		}
		data, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		old[dir+"/"+e.Name()] = &fstest.MapFile{Data: data}
	}
	return old, need
}

// DatabaseBelowNeed is a fresh database of srv migrated to the release
// before the binary's (MigrationsBelowNeed): its URL, and the binary's need.
func DatabaseBelowNeed(t testing.TB, srv *Server, fsys fs.FS, dir string) (string, uint) {
	t.Helper()
	url := srv.NewDatabase(t)
	old, need := MigrationsBelowNeed(t, fsys, dir)
	if err := dbschema.Migrate(context.Background(), url, old, dir); err != nil {
		t.Fatal(err)
	}
	return url, need
}
