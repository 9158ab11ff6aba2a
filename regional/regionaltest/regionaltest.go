// Package regionaltest gives a test a regional database of its own,
// migrated, without the whole platform (devstack/stacktest starts that):
// for the tests of a piece that works on the database alone (the outbox
// workers, the bin, the usage counter). Only tests import it.
package regionaltest

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/regional/migrations"
)

// Database is the URL of a fresh regional database on the shared "api"
// test server, as the migrations leave an empty one (a copy of the
// template migrated once per server, see dbtest.NewMigratedDatabase).
func Database(t testing.TB) string {
	t.Helper()
	srv := dbtest.Shared(t, "api")
	url, err := srv.NewMigratedDatabase(context.Background(), "regional", func(ctx context.Context, u string) error {
		return dbschema.Migrate(ctx, u, migrations.FS, migrations.Dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.DropAtEnd(t, url)
	return url
}

// Open is a pool on url, closed when the test ends.
func Open(t testing.TB, url string) *db.Pool {
	t.Helper()
	p, err := db.Open(context.Background(), url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
