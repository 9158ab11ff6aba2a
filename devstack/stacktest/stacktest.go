// Package stacktest starts the whole platform for an end-to-end test, over
// real PostgreSQL servers (one per region) from dbtest, and gives the test an
// HTTP client that reaches the router under any host name.
package stacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/conformance"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/tenancy"
	"golang.org/x/sync/errgroup"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Secret is the identity secret of test stacks.
var Secret = []byte("stacktest-identity-secret-0123456789")

// Options of an environment.
type Options struct {
	// PrivateClusters get a database server of their own, which the test may
	// stop; the others share the test process's server of that name.
	// "tenancy" names the directory's server.
	PrivateClusters []string
	// Webhooks overrides the test defaults (private targets allowed, 200ms
	// first retry).
	Webhooks *webhooks.Options
	// TrustedProxies are the addresses whose X-Forwarded-For the routers believe.
	TrustedProxies []netip.Prefix
	// ExportPartRows is the most rows in one export file (default 1,000,000).
	ExportPartRows int
	// ExportChunkBytes is the largest stored chunk of an export (default 256 KiB).
	ExportChunkBytes int
	// Routers is how many router replicas run as one ring (default 1),
	// PeerDeadline their limit checks' wait on a peer, and StartRing what
	// starts a member of the ring (peerlimit.StartMember; devstack.Config).
	Routers      int
	PeerDeadline time.Duration
	StartRing    ring.Start
	// Clusters are the shared clusters started, of AllClusters (default
	// api alone: most tests need one region, and each one more is a
	// database and an instance to start). PrivateClusters are started too.
	Clusters []string
}

// AllClusters are the interface's shared clusters: Europe, the US, Asia.
var AllClusters = []string{"api", "us1", "as1"}

// Env is a running platform with a management key.
type Env struct {
	Stack   *devstack.Stack
	Mgmt    devstack.ManagementCredentials
	Client  *http.Client
	Servers map[string]*dbtest.Server
	// Clock is the platform's clock: a test moves it forward to make points
	// expire and pending points activate.
	Clock *clock.Clock
	rec   *recorder // the answers of Do, checked against the reference at the end
}

// TestPlan is the plan of the projects CreateProject makes.
const TestPlan = "test"

// Start starts a platform for t and stops it when t ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	// Every answer of every end-to-end test is encoded by encoding/json as
	// well, and a difference is the test's 500.
	httpx.CompareEncoders.Store(true)
	private := map[string]bool{}
	for _, c := range o.PrivateClusters {
		private[c] = true
	}
	conformance.Preload()
	want := map[string]bool{}
	for _, c := range o.Clusters {
		want[c] = true
	}
	if len(o.Clusters) == 0 {
		want["api"] = true
	}
	for _, c := range o.PrivateClusters {
		want[c] = true
	}
	var regions []devstack.Region
	for _, r := range devstack.DefaultRegions() {
		if want[r.Cluster] {
			regions = append(regions, r)
		}
	}
	names := []string{"tenancy"}
	for _, r := range regions {
		names = append(names, r.Cluster)
	}
	dbtest.StartShared(t, names...)
	servers := map[string]*dbtest.Server{"tenancy": dbtest.Shared(t, "tenancy")}
	if private["tenancy"] {
		servers["tenancy"] = dbtest.Private(t)
	}
	for i := range regions {
		name := regions[i].Cluster
		if private[name] {
			servers[name] = dbtest.Private(t)
		} else {
			servers[name] = dbtest.Shared(t, name)
		}
	}
	// The databases, already migrated (see NewMigratedDatabase), made at
	// once: devstack.Start is told so.
	var tenancyURL string
	g, gctx := errgroup.WithContext(context.Background())
	g.Go(func() (err error) {
		tenancyURL, err = servers["tenancy"].NewMigratedDatabase(gctx, "tenancy", func(ctx context.Context, u string) error {
			return dbschema.Migrate(ctx, u, tenancy.Migrations, tenancy.MigrationsDir)
		})
		return err
	})
	for i := range regions {
		g.Go(func() (err error) {
			regions[i].DatabaseURL, err = servers[regions[i].Cluster].NewMigratedDatabase(gctx, "regional", func(ctx context.Context, u string) error {
				return dbschema.Migrate(ctx, u, regional.Migrations, regional.MigrationsDir)
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("stacktest: databases: %v", err)
	}
	servers["tenancy"].DropAtEnd(t, tenancyURL)
	for i := range regions {
		servers[regions[i].Cluster].DropAtEnd(t, regions[i].DatabaseURL)
	}
	ctx := context.Background()
	cfg := o.config(tenancyURL, regions)
	clk := cfg.Clock
	stack, err := devstack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("stacktest: start: %v", err)
	}
	t.Cleanup(stack.Close)
	mgmt, err := stack.CreateManagementKey(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	// Test projects are on a plan whose limits no test reaches, so that
	// every request still takes the limiter's path, and that may hold the
	// whole of an instance's connections, as one project alone on its
	// cluster may; the rate-limit and bulkhead tests make plans of their own.
	if err := db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		return tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: TestPlan, Features: []string{"webhooks"}, // as standard
			RequestsPerMinute: 1_000_000, RequestsPerHour: 1_000_000_000, ClusterShare: 1})
	}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	t.Cleanup(func() { checkConformance(t, rec) })
	return &Env{Stack: stack, Mgmt: mgmt, Client: ClientFor(stack.RouterURL), Servers: servers, Clock: clk, rec: rec}
}

// config is the development stack's configuration of a test's stack.
func (o Options) config(tenancyURL string, regions []devstack.Region) devstack.Config {
	hooks := webhooks.Options{AllowPrivateTargets: true, BackoffBase: 200 * time.Millisecond, Timeout: 2 * time.Second}
	if o.Webhooks != nil {
		hooks = *o.Webhooks
	}
	clk := &clock.Clock{}
	// Hundreds of stacks run in a test run, most of each one's life idle:
	// its sweeps run at once when the test moves the clock (Clock.Every),
	// so their interval is only for what falls due by itself; its workers
	// poll quickly while tasks are about (queued or claimed in the last
	// seconds) and slowly when there are none.
	const sweep = time.Second
	worker := async.WorkerOptions{Poll: 20 * time.Millisecond, IdlePoll: time.Second}
	return devstack.Config{
		Clock:            clk,
		SweepInterval:    sweep,
		Webhooks:         hooks,
		TrustedProxies:   o.TrustedProxies,
		ExportPartRows:   o.ExportPartRows,
		ExportChunkBytes: o.ExportChunkBytes,
		Routers:          o.Routers,
		PeerDeadline:     o.PeerDeadline,
		StartRing:        o.StartRing,
		Worker:           worker,
		TenancyURL:       tenancyURL,
		Regions:          regions,
		Migrated:         true,
		IdentitySecret:   Secret,
		WatchInterval:    200 * time.Millisecond,
		Log:              telemetry.NewLogger(io.Discard, 0),
	}
}

// ClientFor returns a client that sends every request to the router at
// routerURL, whatever host name its URL holds.
func ClientFor(routerURL string) *http.Client {
	u, _ := url.Parse(routerURL)
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, u.Host)
			},
			MaxIdleConnsPerHost: 64,
		},
	}
}

// Resp is an answer.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object.
func (r Resp) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// Do sends a request. body is JSON-encoded unless it is a string or []byte.
func (e *Env) Do(t testing.TB, method, rawURL string, header http.Header, body any) Resp {
	t.Helper()
	return e.recordingDo(t, method, rawURL, header, body)
}

// Do sends a request with client.
func Do(t testing.TB, client *http.Client, method, rawURL string, header http.Header, body any) Resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if rd != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// MgmtHeader carries the environment's management credentials.
func (e *Env) MgmtHeader() http.Header {
	return http.Header{"X-Management-Id": {e.Mgmt.ID}, "X-Management-Token": {e.Mgmt.Token}}
}

// Project is a project made through the management API.
type Project struct {
	ID, Cluster, AppID, AppToken string
	ClientAppID, ClientToken     string // the client-side pair
}

// Header carries the project's application keys.
func (p Project) Header() http.Header {
	return http.Header{"X-App-Id": {p.AppID}, "X-App-Token": {p.AppToken}}
}

// ClientHeader carries the project's client-side keys, sent from origin
// (none when empty), as the client SDK sends them.
func (p Project) ClientHeader(origin string) http.Header {
	h := http.Header{"X-Client-Application-Id": {p.ClientAppID}, "X-Client-Token": {p.ClientToken},
		"X-Voucherify-Channel": {"Browser-ClientSide-SDK-v2.9.4"}}
	if origin != "" {
		h.Set("Origin", origin)
	}
	return h
}

// CreateProject makes a project in cluster through the router and management.
func (e *Env) CreateProject(t testing.TB, cluster string) Project {
	t.Helper()
	r := e.Do(t, "POST", "http://api.localhost/management/v1/projects", e.MgmtHeader(),
		map[string]any{"name": "test " + cluster, "cluster_id": cluster, "plan": TestPlan})
	if r.Status != 200 {
		t.Fatalf("create project: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	key, client := m["server_side_key"].(map[string]any), m["client_side_key"].(map[string]any)
	return Project{ID: m["id"].(string), Cluster: cluster, AppID: key["app_id"].(string), AppToken: key["app_token"].(string),
		ClientAppID: client["app_id"].(string), ClientToken: client["app_token"].(string)}
}

// URL is a cluster's base URL as the test client reaches it.
func URL(cluster, path string) string {
	api, _ := devstack.ClusterHosts(cluster, "localhost")
	return "http://" + api + path
}

// Eventually polls cond every 20 ms until it holds, and fails t when it
// has not within d: for what the asynchronous phase does after a response.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
