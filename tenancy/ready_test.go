package tenancy_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/tenancy"
)

// migrationsBefore is the tenancy migrations of the release before the
// last migration: those whose version is below the binary's need.
func migrationsBefore(t *testing.T) (fs.FS, uint) {
	t.Helper()
	need, err := dbschema.MigrationsVersion(tenancy.Migrations, tenancy.MigrationsDir)
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	entries, err := fs.ReadDir(tenancy.Migrations, tenancy.MigrationsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if uint(v) < need {
			data, err := fs.ReadFile(tenancy.Migrations, tenancy.MigrationsDir+"/"+e.Name())
			if err != nil {
				t.Fatal(err)
			}
			old[tenancy.MigrationsDir+"/"+e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	return old, need
}

// A router rolled out before management's release migrated the directory
// is not ready, saying why, until the directory is migrated.
func TestResolverIsNotReadyOnAnOlderDirectorySchema(t *testing.T) {
	ctx := context.Background()
	url := dbtest.Shared(t, "tenancy").NewDatabase(t)
	old, need := migrationsBefore(t)
	if err := dbschema.Migrate(ctx, url, old, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{Log: quiet})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 50*time.Millisecond)
	err = r.Ready(ctx)
	want := "the directory's schema is at version " + strconv.Itoa(int(need-1)) + ", this binary needs " + strconv.Itoa(int(need)) +
		": migrate the tenancy database (management's release) first"
	if !errors.Is(err, dbschema.ErrBehind) || err.Error() != want {
		t.Fatalf("Ready on the old schema: %v, want %q", err, want)
	}
	// Management's release migrates it: ready within a few seconds.
	if err := dbschema.Migrate(ctx, url, tenancy.Migrations, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "ready once migrated", func() bool { return r.Ready(ctx) == nil })
}

// While the directory cannot be reached, a resolver that read it lately
// (and found its schema good) stays ready and answers from its caches, up
// to ReadyOffline after its last read; one that never read it is not ready.
func TestResolverStaysReadyThroughAShortDirectoryOutage(t *testing.T) {
	ctx := context.Background()
	srv := dbtest.Private(t)
	pool, url := directoryOn(t, srv)
	p, key, token := projectWithKey(t, pool)
	const offline = 2 * time.Second
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{ReadyOffline: offline, Log: quiet})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 50*time.Millisecond)
	waitUntil(t, 5*time.Second, "ready and synced", func() bool { return r.Ready(ctx) == nil && !r.LastSync().IsZero() })
	// Watch evicts what changed in the last WatchLookback at each poll:
	// the project just made stays cached once it is past.
	time.Sleep(tenancy.WatchLookback + 300*time.Millisecond)
	if _, _, err := r.App(ctx, key.AppID, token); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	stopped := time.Now()
	if err := pool.Ping(ctx); err == nil {
		t.Fatal("the directory still answers")
	}
	if err := r.Ready(ctx); err != nil {
		t.Fatalf("Ready just after the directory went down: %v", err)
	}
	if _, got, err := r.App(ctx, key.AppID, token); err != nil || got.ID != p.ID {
		t.Fatalf("a cached key during the outage: %v %v", got.ID, err)
	}

	// A resolver that never read the directory has nothing to serve.
	cold, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cold.Close)
	c := tenancy.NewResolver(cold, tenancy.ResolverOptions{ReadyOffline: offline, Log: quiet})
	go c.Watch(wctx, 50*time.Millisecond)
	if err := c.Ready(ctx); err == nil || !strings.Contains(err.Error(), "was not read since this instance started") {
		t.Fatalf("a cold resolver with the directory down: %v", err)
	}

	// Past ReadyOffline, the caches hold nothing it could still serve.
	time.Sleep(time.Until(stopped.Add(offline + 100*time.Millisecond)))
	if err := r.Ready(ctx); err == nil || !strings.Contains(err.Error(), "was last read") || !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("Ready %v after the outage began: %v", offline, err)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, d)
		}
	}
}
