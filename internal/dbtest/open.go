package dbtest

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/internal/db"
)

// OpenPool is a pool on a new empty database of the shared server name,
// closed when the test ends: what the database layer's own tests start
// from.
func OpenPool(t testing.TB, name string) *db.Pool {
	t.Helper()
	url := Shared(t, name).NewDatabase(t)
	pool, err := db.Open(context.Background(), url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
