package router_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/router"
	"github.com/tallyhq/tally/tenancy"
)

// readyRouter is a router instance over the directory at tenancyURL, with
// its own pool, caches and watch, as `tally router` runs: its URL, its
// admin endpoints' URL (/readyz) and the instance.
func readyRouter(t *testing.T, tenancyURL string) (string, string, *router.Router, *tenancy.Resolver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := telemetry.NewLogger(io.Discard, 0)
	pool, err := db.Open(ctx, tenancyURL, db.Options{Name: "tally-router"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	res := tenancy.NewResolver(pool, tenancy.ResolverOptions{Log: log})
	go res.Watch(ctx, 50*time.Millisecond)
	rt, err := router.New(router.Config{BaseDomain: "localhost", IdentitySecret: stacktest.Secret, Resolver: res, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go httpx.ServePublic(ctx, l, rt.Handler(), rt.PublicOptions())
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := a.Addr().String()
	a.Close()
	go telemetry.ServeAdmin(ctx, admin, telemetry.NewMetrics("router", ""), rt.Ready, log)
	stacktest.Eventually(t, 5*time.Second, "admin endpoints up", func() bool {
		r, err := http.Get("http://" + admin + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	return "http://" + l.Addr().String(), "http://" + admin, rt, res
}

func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	r := stacktest.Do(t, http.DefaultClient, "GET", admin+"/readyz", nil, nil)
	return r.Status, string(r.Body)
}

// A directory outage does not take every router out of the load balancer:
// one that read the directory lately keeps serving the projects its caches
// hold (the rate limits fail open) and stays ready; one that starts during
// the outage has nothing cached and is not ready.
func TestRouterStaysReadyThroughADirectoryOutageOnceSynced(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"tenancy"}})
	p := e.CreateProject(t, "api")
	tenancyURL := e.Stack.Config().TenancyURL
	url, admin, rt, res := readyRouter(t, tenancyURL)
	stacktest.Eventually(t, 10*time.Second, "the router ready and synced", func() bool {
		return rt.Ready(context.Background()) == nil && !res.LastSync().IsZero()
	})
	// Watch evicts what changed in the last tenancy.WatchLookback at each
	// poll: the project and plan just made are cached for good after it.
	time.Sleep(tenancy.WatchLookback + 500*time.Millisecond)
	client := stacktest.ClientFor(url)
	if r := stacktest.Do(t, client, "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil); r.Status != 200 {
		t.Fatalf("before the outage: %d %s", r.Status, r.Body)
	}

	e.Servers["tenancy"].Stop()
	if err := e.Stack.Tenancy.Ping(context.Background()); err == nil {
		t.Fatal("the directory still answers")
	}
	if s, body := readyz(t, admin); s != 200 {
		t.Errorf("/readyz of a synced router during the outage: %d %s", s, body)
	}
	if r := stacktest.Do(t, client, "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil); r.Status != 200 {
		t.Errorf("a cached project during the outage: %d %s", r.Status, r.Body)
	}

	coldURL, coldAdmin, _, _ := readyRouter(t, tenancyURL)
	if s, body := readyz(t, coldAdmin); s != 503 || !strings.Contains(body, "was not read since this instance started") {
		t.Errorf("/readyz of a router started during the outage: %d %s", s, body)
	}
	if r := stacktest.Do(t, stacktest.ClientFor(coldURL), "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil); r.Status != 503 {
		t.Errorf("a router started during the outage: %d %s", r.Status, r.Body)
	}
}

// A router rolled out before management's release migrated the directory
// (another region's, say) is not ready, saying so, until it is migrated.
func TestRouterIsNotReadyOnAnOlderDirectorySchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, need := dbtest.DatabaseBelowNeed(t, dbtest.Shared(t, "tenancy"), tenancy.Migrations, tenancy.MigrationsDir)
	_, admin, _, _ := readyRouter(t, url)
	want := "the directory's schema is at version " + strconv.Itoa(int(need-1)) + ", this binary needs " + strconv.Itoa(int(need)) +
		": migrate the tenancy database (management's release) first"
	if s, body := readyz(t, admin); s != 503 || !strings.Contains(body, want) {
		t.Fatalf("/readyz on the old schema: %d %s, want 503 saying %q", s, body, want)
	}
	if err := dbschema.Migrate(ctx, url, tenancy.Migrations, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "ready once the directory is migrated", func() bool {
		s, _ := readyz(t, admin)
		return s == 200
	})
}
