package tenancy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/tenancy"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// directory is a pool on a fresh, migrated tenancy database.
func directory(t *testing.T) *db.Pool {
	t.Helper()
	pool, _ := directoryOn(t, dbtest.Shared(t, "tenancy"))
	return pool
}

// directoryOn is directory on srv (a test that stops its server has one of
// its own), with the database's URL.
func directoryOn(t *testing.T, srv *dbtest.Server) (*db.Pool, string) {
	t.Helper()
	url := srv.NewDatabase(t)
	if err := dbschema.Migrate(context.Background(), url, tenancy.Migrations, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(context.Background(), url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// projectWithKey makes the api cluster and a project in it, returning the
// project's key pair.
func projectWithKey(t *testing.T, pool *db.Pool) (tenancy.Project, tenancy.AppKey, string) {
	t.Helper()
	ctx := context.Background()
	var p tenancy.Project
	var key tenancy.AppKey
	var token string
	if err := db.InTx(ctx, pool, func(q pgx.Tx) error {
		if err := tenancy.UpsertCluster(ctx, q, tenancy.Cluster{Name: "api", Region: "europe", Kind: tenancy.Shared,
			APIHost: "api.example.com", UpstreamURL: "http://10.0.0.1"}); err != nil {
			return err
		}
		p = tenancy.Project{Name: "p", Cluster: "api"}
		var err error
		key, token, err = tenancy.CreateProject(ctx, q, &p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p, key, token
}

func TestResolverCachesAndForgetsWhatChanges(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	tx := func(f func(tx pgx.Tx) error) {
		t.Helper()
		if err := db.InTx(ctx, pool, f); err != nil {
			t.Fatal(err)
		}
	}
	tx(func(q pgx.Tx) error {
		return tenancy.UpsertCluster(ctx, q, tenancy.Cluster{Name: "api", Region: "europe", Kind: tenancy.Shared,
			APIHost: "api.example.com", DownloadHost: "download.example.com", UpstreamURL: "http://10.0.0.1"})
	})
	var p tenancy.Project
	var key tenancy.AppKey
	var token string
	tx(func(q pgx.Tx) error {
		p = tenancy.Project{Name: "p", Cluster: "api"}
		var err error
		key, token, err = tenancy.CreateProject(ctx, q, &p)
		return err
	})

	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{NegativeTTL: time.Minute})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 50*time.Millisecond)

	if c, kind, err := r.Host(ctx, "download.example.com"); err != nil || c.Name != "api" || kind != tenancy.DownloadHost {
		t.Fatalf("download host: %v %v %v", c, kind, err)
	}
	if _, _, err := r.Host(ctx, "nope.example.com"); !errors.Is(err, tenancy.ErrUnknownHost) {
		t.Fatalf("unknown host: %v", err)
	}
	if _, got, err := r.App(ctx, key.AppID, token); err != nil || got.ID != p.ID {
		t.Fatalf("app key: %v %v", got, err)
	}
	if _, _, err := r.App(ctx, key.AppID, token+"x"); !errors.Is(err, tenancy.ErrBadCredentials) {
		t.Fatalf("wrong token: %v", err)
	}

	// A project update reaches the cache through the change log.
	p.Name = "renamed"
	tx(func(q pgx.Tx) error { return tenancy.UpdateProject(ctx, q, &p) })
	waitFor(t, func() bool { got, _ := r.Project(ctx, p.ID); return got.Name == "renamed" })

	// A revoked key stops working.
	tx(func(q pgx.Tx) error { _, err := tenancy.RevokeAppKey(ctx, q, p.ID, key.AppID); return err })
	waitFor(t, func() bool {
		_, _, err := r.App(ctx, key.AppID, token)
		return errors.Is(err, tenancy.ErrBadCredentials)
	})

	// Deleting the project revokes all its keys.
	var k2 tenancy.AppKey
	var t2 string
	tx(func(q pgx.Tx) error {
		var err error
		k2, t2, err = tenancy.CreateAppKey(ctx, q, p.ID, tenancy.KeyApp, "second")
		return err
	})
	waitFor(t, func() bool { _, _, err := r.App(ctx, k2.AppID, t2); return err == nil })
	tx(func(q pgx.Tx) error { return tenancy.DeleteProject(ctx, q, p.ID) })
	waitFor(t, func() bool { _, _, err := r.App(ctx, k2.AppID, t2); return errors.Is(err, tenancy.ErrBadCredentials) })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 2s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A revocation whose transaction ran long before it committed (here, six
// seconds waiting, past the watch's five-second look-back) still reaches
// every cache: its change is dated when it is written, not when its
// transaction began.
func TestARevocationInALongTransactionIsSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := directory(t)
	p, key, token := projectWithKey(t, pool)
	// The project's own changes are old news, so that the watch, which
	// reads the last five seconds again on every poll, leaves the key cached.
	if _, err := pool.Exec(ctx, `UPDATE directory_changes SET changed_at = changed_at - INTERVAL '1 minute'`); err != nil {
		t.Fatal(err)
	}
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 50*time.Millisecond)
	if _, _, err := r.App(ctx, key.AppID, token); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, pool, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, `SELECT now()`); err != nil { // the transaction's time is taken here
			return err
		}
		time.Sleep(tenancy.WatchLookback + time.Second)
		_, err := tenancy.RevokeAppKey(ctx, q, p.ID, key.AppID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Within 2 s of the revocation's commit.
	waitFor(t, func() bool {
		_, _, err := r.App(ctx, key.AppID, token)
		return errors.Is(err, tenancy.ErrBadCredentials)
	})
}

// Callers waiting on one directory read share its outcome: the first
// caller hanging up does not fail the others' lookup.
func TestAnAbandonedLookupDoesNotFailTheOthersWaitingOnIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := directory(t)
	_, key, token := projectWithKey(t, pool)
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})

	// Hold the keys' table, so that the read of the key waits.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `LOCK TABLE app_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	first, hangUp := context.WithCancel(ctx)
	go r.App(first, key.AppID, token)
	time.Sleep(200 * time.Millisecond) // the first caller's read is under way
	second := make(chan error, 1)
	go func() { _, _, err := r.App(ctx, key.AppID, token); second <- err }()
	time.Sleep(100 * time.Millisecond)
	hangUp()
	time.Sleep(100 * time.Millisecond)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second caller's lookup: %v", err)
	}
}

// budget counts a client's lookups that found nothing, out of limit.
type budget struct{ taken, charged, limit int }

func (b *budget) Take(string) (func(found bool), bool) {
	if b.charged >= b.limit {
		return nil, false
	}
	b.taken++
	return func(found bool) {
		if !found {
			b.charged++
		}
	}, true
}

// A client's lookups of names it sent that do not exist draw on its
// budget; once it is spent, its uncached lookups of such names are refused
// without a query, its cached names still resolve, and what it does not
// send (a project, a plan) is read whatever the budget.
func TestLookupsThatFindNothingDrawOnTheCallersBudget(t *testing.T) {
	pool := directory(t)
	p, key, token := projectWithKey(t, pool)
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	b := &budget{limit: 3}
	ctx := tenancy.WithLookupBudget(context.Background(), b)
	if _, _, err := r.App(ctx, key.AppID, token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Host(ctx, "api.example.com"); err != nil {
		t.Fatal(err)
	}
	if b.taken != 2 || b.charged != 0 {
		t.Fatalf("two lookups that found their names: %d taken, %d charged", b.taken, b.charged)
	}
	for i, err := range []error{
		func() error { _, _, err := r.App(ctx, "app_unknown_1", "x"); return err }(),
		func() error { _, _, err := r.Host(ctx, "unknown.example.com"); return err }(),
		func() error { _, _, _, err := r.Bearer(ctx, "no-such-token"); return err }(),
	} {
		if err == nil || errors.Is(err, tenancy.ErrLookupsSpent) {
			t.Fatalf("lookup %d of 3: %v", i+1, err)
		}
	}
	if b.charged != 3 {
		t.Fatalf("3 lookups that found nothing charged %d", b.charged)
	}
	// A name in the negative cache costs nothing and is answered as before.
	if _, _, err := r.App(ctx, "app_unknown_1", "x"); !errors.Is(err, tenancy.ErrBadCredentials) {
		t.Fatalf("a name known not to exist: %v", err)
	}
	misses := r.Misses()
	for _, id := range []string{"app_unknown_2", "app_unknown_3"} {
		if _, _, err := r.App(ctx, id, "x"); !errors.Is(err, tenancy.ErrLookupsSpent) {
			t.Fatalf("a new name with the budget spent: %v", err)
		}
	}
	if _, _, err := r.Host(ctx, "other.example.com"); !errors.Is(err, tenancy.ErrLookupsSpent) {
		t.Fatalf("a new host with the budget spent: %v", err)
	}
	if got := r.Misses(); got != misses {
		t.Fatalf("refused lookups read the directory: misses %v → %v", misses, got)
	}
	if _, _, err := r.App(ctx, key.AppID, token); err != nil {
		t.Fatalf("the client's own cached key with its budget spent: %v", err)
	}
	// Another client's budget is its own.
	if _, _, err := r.App(tenancy.WithLookupBudget(context.Background(), &budget{limit: 3}), "app_unknown_2", "x"); !errors.Is(err, tenancy.ErrBadCredentials) {
		t.Fatalf("another client: %v", err)
	}
	// On a replica whose caches are cold, the spent budget refuses even
	// the client's real key, but a project or plan is no name it sent.
	cold := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	if _, _, err := cold.App(ctx, key.AppID, token); !errors.Is(err, tenancy.ErrLookupsSpent) {
		t.Fatalf("an uncached key with the budget spent: %v", err)
	}
	if _, err := cold.Project(ctx, p.ID); err != nil {
		t.Fatalf("a project with the budget spent: %v", err)
	}
	if _, err := cold.Plan(ctx, "free"); err != nil && !errors.Is(err, tenancy.ErrPlanNotFound) {
		t.Fatalf("a plan with the budget spent: %v", err)
	}
}
