// Package devstack runs the whole platform in one process: management, one
// regional instance per cluster and the router, over databases whose URLs it
// is given. `tally dev` runs it over local PostgreSQL servers, and the
// end-to-end tests run it over the servers of their test helper.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/ids"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/management"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/router"
	"github.com/tallyhq/tally/tenancy"
)

// Region is one cluster of the stack and its database.
type Region struct {
	Cluster     string // api, us1, as1
	Region      string // europe, us, asia
	DatabaseURL string
}

// DefaultRegions are the shared clusters of the interface.
func DefaultRegions() []Region {
	return []Region{{Cluster: "api", Region: "europe"}, {Cluster: "us1", Region: "us"}, {Cluster: "as1", Region: "asia"}}
}

// Config of a stack.
type Config struct {
	BaseDomain   string // default "localhost"
	RouterAddr   string // default "127.0.0.1:0"
	PublicScheme string // default "http"
	TenancyURL   string
	Regions      []Region
	// Migrated says the databases are at the latest schema already (copies
	// of stacktest's migrated templates): Start does not ask each again.
	Migrated       bool
	IdentitySecret []byte
	// OperatorSecret is management's credential for regional's /internal
	// endpoints (default: a random one per start).
	OperatorSecret []byte
	TrustedProxies []netip.Prefix
	WatchInterval  time.Duration // directory change polling, default 500ms
	// AdminBasePort, when set, serves each service's /metrics, /healthz and
	// /readyz on consecutive ports from it (router, management, regions…).
	AdminBasePort int
	Log           *slog.Logger
	// Worker and Webhooks tune every regional instance's background work.
	Worker   async.WorkerOptions
	Webhooks webhooks.Options
	// Clock is what time-driven work reads (nil: the wall clock), and
	// SweepInterval how often it looks (default a minute).
	Clock         *clock.Clock
	SweepInterval time.Duration
	// BinRetention is how long the bin keeps what was deleted (default 30 days).
	BinRetention time.Duration
	// ExportPartRows and ExportRetention: the most rows in one export file
	// and how long files are kept (defaults 1,000,000 and 30 days).
	ExportPartRows   int
	ExportRetention  time.Duration
	ExportChunkBytes int
	// ClusterBasePort is the first of the ports, one per cluster in the
	// order of Regions, on which the router also serves each cluster
	// whatever Host a request names, on the router's listen host; 0 picks
	// free ports. Bare localhost on the router's port is the api cluster.
	ClusterBasePort int
	// Routers is how many router replicas run (default 1). More than one
	// form one ring keeping the per-address limits (internal/peerlimit),
	// each on a port of its own on the router's listen host; the first
	// also serves the clusters' own ports.
	Routers int
	// PeerDeadline is how long the replicas' limit checks wait on a peer
	// (default peerlimit's, 20 ms).
	PeerDeadline time.Duration
	// StartRing starts a member of the replicas' ring (peerlimit.StartMember);
	// needed with more than one router. It is handed in so that the
	// stack, and every test built on it, does not link the ring's
	// gubernator, gRPC and Kubernetes client (internal/peerlimit/ring).
	StartRing ring.Start
}

// Stack is a running platform.
type Stack struct {
	cfg        Config
	RouterURL  string // where the router listens, e.g. http://127.0.0.1:8080
	RouterPort string
	// ClusterURLs are where each cluster is served on a port of its own,
	// e.g. http://127.0.0.1:8081: base URLs that work from any client.
	ClusterURLs map[string]string
	Management  *management.App
	Regional    map[string]*regional.App
	Tenancy     *db.Pool
	Resolver    *tenancy.Resolver
	// RouterMetrics are the first router instance's metrics.
	RouterMetrics *telemetry.Metrics
	// RouterURLs are the base URLs of the router replicas (Config.Routers),
	// RouterURL first.
	RouterURLs []string
	// Ring is each replica's member of the ring, in the order of
	// RouterURLs (none with one replica).
	Ring []ring.Member

	stopRouter []context.CancelFunc // each replica's, from the second

	mgmtURL      string
	regionalURLs map[string]string
	runCtx       context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	closers      []func()
	errs         chan error
}

// Config is the configuration the stack runs with, defaults filled in.
func (s *Stack) Config() Config { return s.cfg }

// ClusterHosts returns the API and download hosts of a shared cluster.
func ClusterHosts(cluster, domain string) (api, download string) {
	if cluster == "api" {
		return "api." + domain, "download." + domain
	}
	return cluster + ".api." + domain, cluster + ".download." + domain
}

// Start migrates the databases and starts every service.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if cfg.BaseDomain == "" {
		cfg.BaseDomain = "localhost"
	}
	if cfg.RouterAddr == "" {
		cfg.RouterAddr = "127.0.0.1:0"
	}
	if cfg.PublicScheme == "" {
		cfg.PublicScheme = "http"
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 500 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.OperatorSecret == nil {
		cfg.OperatorSecret = []byte(ids.Secret(32))
	}
	if !cfg.Migrated {
		if err := MigrateAll(ctx, cfg.TenancyURL, cfg.Regions); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Stack{cfg: cfg, Regional: map[string]*regional.App{}, regionalURLs: map[string]string{}, runCtx: runCtx, cancel: cancel, errs: make(chan error, 16)}
	if err := s.start(ctx, runCtx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// MigrateAll brings the tenancy and regional databases to the latest schema.
func MigrateAll(ctx context.Context, tenancyURL string, regions []Region) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return dbschema.Migrate(gctx, tenancyURL, tenancy.Migrations, tenancy.MigrationsDir) })
	for _, r := range regions {
		g.Go(func() error {
			if err := dbschema.Migrate(gctx, r.DatabaseURL, regional.Migrations, regional.MigrationsDir); err != nil {
				return fmt.Errorf("cluster %s: %w", r.Cluster, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (s *Stack) start(ctx, runCtx context.Context) error {
	cfg := s.cfg
	pool, err := db.Open(ctx, cfg.TenancyURL, db.Options{Name: "tally-dev"})
	if err != nil {
		return err
	}
	s.Tenancy = pool
	s.closers = append(s.closers, pool.Close)
	admin := cfg.AdminBasePort

	// The router's listeners first, so that the services know its port
	// (download links); it serves once the rest is up.
	l, err := net.Listen("tcp", cfg.RouterAddr)
	if err != nil {
		return fmt.Errorf("router: listen on %s: %w", cfg.RouterAddr, err)
	}
	s.RouterPort = fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	s.RouterURL = "http://" + l.Addr().String()
	clusterListeners, err := s.listenClusters(l)
	if err != nil {
		l.Close()
		return err
	}
	listening := true
	defer func() {
		if listening { // an error before the router serves
			l.Close()
			for _, cl := range clusterListeners {
				cl.Close()
			}
		}
	}()

	// Regional instances first: the directory records where they listen.
	for _, r := range cfg.Regions {
		if err := s.startRegional(ctx, runCtx, pool, r); err != nil {
			return err
		}
	}
	if err := s.startManagement(ctx, runCtx); err != nil {
		return err
	}
	if err := s.startRing(runCtx); err != nil {
		return err
	}
	rt, resolver, rm, err := s.newRouter(runCtx, s.member(0))
	if err != nil {
		return err
	}
	s.RouterURLs = []string{s.RouterURL}
	for i := 1; i < cfg.Routers; i++ {
		rti, _, _, err := s.newRouter(runCtx, s.member(i))
		if err != nil {
			return err
		}
		li, err := net.Listen("tcp", net.JoinHostPort(l.Addr().(*net.TCPAddr).IP.String(), "0"))
		if err != nil {
			return fmt.Errorf("router %d: %w", i+1, err)
		}
		rctx, stop := context.WithCancel(runCtx)
		s.stopRouter = append(s.stopRouter, stop)
		s.RouterURLs = append(s.RouterURLs, "http://"+li.Addr().String())
		s.run(labeled("router", func() error { return httpx.ServePublic(rctx, li, rti.Handler(), rti.PublicOptions()) }))
	}
	listening = false
	s.Resolver, s.RouterMetrics = resolver, rm
	public := rt.PublicOptions()
	s.run(labeled("router", func() error { return httpx.ServePublic(runCtx, l, rt.Handler(), public) }))
	for i, cl := range clusterListeners {
		apiHost, _ := ClusterHosts(cfg.Regions[i].Cluster, cfg.BaseDomain)
		s.run(func() error { return httpx.ServePublic(runCtx, cl, rt.HandlerFor(apiHost), public) })
	}
	if admin != 0 {
		s.serveAdmin(runCtx, admin, rm, rt.Ready)
	}
	return nil
}

// startRegional starts region r's regional instance, serves it, and
// records it in the directory.
func (s *Stack) startRegional(ctx, runCtx context.Context, pool *db.Pool, r Region) error {
	cfg := s.cfg
	admin := cfg.AdminBasePort
	apiHost, dlHost := ClusterHosts(r.Cluster, cfg.BaseDomain)
	m := telemetry.NewMetrics("regional", r.Cluster)
	app, err := regional.New(ctx, regional.Config{Cluster: r.Cluster, DatabaseURL: r.DatabaseURL, TenancyURL: cfg.TenancyURL,
		IdentitySecret: cfg.IdentitySecret, OperatorSecret: cfg.OperatorSecret,
		Log: cfg.Log.With("service", "regional", "cluster", r.Cluster), Metrics: m,
		Worker: cfg.Worker, Webhooks: cfg.Webhooks, WatchInterval: cfg.WatchInterval, Clock: cfg.Clock, SweepInterval: cfg.SweepInterval,
		BinRetention: cfg.BinRetention, ExportPartRows: cfg.ExportPartRows, ExportRetention: cfg.ExportRetention, ExportChunkBytes: cfg.ExportChunkBytes,
		DownloadBaseURL: cfg.PublicScheme + "://" + dlHost + ":" + s.RouterPort})
	if err != nil {
		return err
	}
	s.closers = append(s.closers, app.Close)
	s.Regional[r.Cluster] = app
	s.run(func() error { app.RunBackground(runCtx); return nil })
	url, err := s.serve(runCtx, "127.0.0.1:0", app.Handler())
	if err != nil {
		return err
	}
	s.regionalURLs[r.Cluster] = url
	if err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
		return tenancy.UpsertCluster(ctx, tx, tenancy.Cluster{Name: r.Cluster, Region: r.Region, Kind: tenancy.Shared,
			APIHost: apiHost, DownloadHost: dlHost, UpstreamURL: url})
	}); err != nil {
		return fmt.Errorf("register cluster %s: %w", r.Cluster, err)
	}
	if admin != 0 {
		s.serveAdmin(runCtx, admin+2+len(s.Regional)-1, m, app.Ready)
	}
	return nil
}

// startManagement starts the management service and serves it.
func (s *Stack) startManagement(ctx, runCtx context.Context) error {
	cfg := s.cfg
	admin := cfg.AdminBasePort
	mm := telemetry.NewMetrics("management", "")
	mgmt, err := management.New(ctx, management.Config{TenancyURL: cfg.TenancyURL, IdentitySecret: cfg.IdentitySecret,
		OperatorSecret: cfg.OperatorSecret,
		Log:            cfg.Log.With("service", "management"), Metrics: mm})
	if err != nil {
		return err
	}
	s.closers = append(s.closers, mgmt.Close)
	s.Management = mgmt
	if s.mgmtURL, err = s.serve(runCtx, "127.0.0.1:0", mgmt.Handler()); err != nil {
		return err
	}
	if admin != 0 {
		s.serveAdmin(runCtx, admin+1, mm, mgmt.Ready)
	}
	return nil
}

// startRing starts the router replicas' ring members, when there are
// several replicas.
func (s *Stack) startRing(runCtx context.Context) error {
	cfg := s.cfg
	if cfg.Routers <= 1 {
		return nil
	}
	if cfg.StartRing == nil {
		return fmt.Errorf("devstack: %d routers need Config.StartRing to form their ring", cfg.Routers)
	}
	var addrs []string
	for range cfg.Routers {
		pl, err := cfg.StartRing(runCtx, "127.0.0.1:0", cfg.PeerDeadline, cfg.Log.With("service", "router", "component", "peerlimit"))
		if err != nil {
			return err
		}
		s.closers = append(s.closers, pl.Close)
		s.Ring = append(s.Ring, pl)
		addrs = append(addrs, pl.Addr())
	}
	for _, pl := range s.Ring {
		pl.SetPeers(addrs)
	}
	return nil
}

// newRouter builds a router instance with its own tenancy pool and resolver,
// sharing nothing with other instances but the database.
func (s *Stack) newRouter(runCtx context.Context, member ring.Ring) (*router.Router, *tenancy.Resolver, *telemetry.Metrics, error) {
	cfg := s.cfg
	pool, err := db.Open(runCtx, cfg.TenancyURL, db.Options{Name: "tally-router"})
	if err != nil {
		return nil, nil, nil, err
	}
	s.closers = append(s.closers, pool.Close)
	log := cfg.Log.With("service", "router")
	resolver := tenancy.NewResolver(pool, tenancy.ResolverOptions{Log: log})
	s.run(func() error { resolver.Watch(runCtx, cfg.WatchInterval); return nil })
	m := telemetry.NewMetrics("router", "")
	m.Register(resolver.Collectors()...)
	// Base URLs in wrong_cluster errors name the port the client reached.
	loopback, _ := ClusterHosts("api", cfg.BaseDomain)
	rt, err := router.New(router.Config{BaseDomain: cfg.BaseDomain, PublicScheme: cfg.PublicScheme, PublicPort: s.RouterPort,
		ManagementURL: s.mgmtURL, TrustedProxies: cfg.TrustedProxies, IdentitySecret: cfg.IdentitySecret,
		LoopbackHost: loopback, PublicURLs: s.ClusterURLs, Resolver: resolver, Log: log, Metrics: m, PeerLimits: member})
	return rt, resolver, m, err
}

// member is replica i's member of the ring, nil without one.
func (s *Stack) member(i int) ring.Ring {
	if i < len(s.Ring) {
		return s.Ring[i]
	}
	return nil // a nil interface: a nil member in one would not be nil
}

// StopRouter stops replica i (from 1; the first serves the clusters' ports
// too): its listener closes, it leaves the ring, and the others are told
// (as discovery would), so that the counters it owned start afresh on
// their new owners.
func (s *Stack) StopRouter(i int) {
	s.stopRouter[i-1]()
	s.Ring[i].Close()
	var rest []string
	for j, pl := range s.Ring {
		if j != i {
			rest = append(rest, pl.Addr())
		}
	}
	for j, pl := range s.Ring {
		if j != i {
			pl.SetPeers(rest)
		}
	}
}

// StartRouter starts one more router instance (its own pool and caches) and
// returns its URL; it stops with the stack.
func (s *Stack) StartRouter() (string, error) {
	rt, _, _, err := s.newRouter(s.runCtx, nil)
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	s.run(func() error { return httpx.ServePublic(s.runCtx, l, rt.Handler(), rt.PublicOptions()) })
	return "http://" + l.Addr().String(), nil
}

// listenClusters opens a listener per cluster on the router's listen host
// and records the clusters' base URLs.
func (s *Stack) listenClusters(router net.Listener) ([]net.Listener, error) {
	host := router.Addr().(*net.TCPAddr).IP
	urlHost := host.String()
	if host.IsUnspecified() {
		urlHost = "127.0.0.1" // listening everywhere: loopback reaches it
	}
	s.ClusterURLs = map[string]string{}
	var ls []net.Listener
	for i, r := range s.cfg.Regions {
		port := 0
		if s.cfg.ClusterBasePort != 0 {
			port = s.cfg.ClusterBasePort + i
		}
		l, err := net.Listen("tcp", net.JoinHostPort(hostOrEmpty(host), fmt.Sprint(port)))
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, fmt.Errorf("cluster %s: listen on port %d: %w", r.Cluster, port, err)
		}
		ls = append(ls, l)
		s.ClusterURLs[r.Cluster] = fmt.Sprintf("%s://%s", s.cfg.PublicScheme,
			net.JoinHostPort(urlHost, fmt.Sprint(l.Addr().(*net.TCPAddr).Port)))
	}
	return ls, nil
}

func hostOrEmpty(ip net.IP) string {
	if ip.IsUnspecified() {
		return ""
	}
	return ip.String()
}

func (s *Stack) serve(ctx context.Context, addr string, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.run(labeled("service", func() error { return httpx.Serve(ctx, l, h) }))
	return "http://" + l.Addr().String(), nil
}

// labeled runs fn under the pprof label server=name, which the goroutines
// it starts (a server's connections) inherit: a CPU profile of the whole
// in-process stack, as the bench takes, then tells the router's share from
// the services' with -tagfocus.
func labeled(name string, fn func() error) func() error {
	return func() (err error) {
		pprof.Do(context.Background(), pprof.Labels("server", name), func(context.Context) { err = fn() })
		return err
	}
}

func (s *Stack) serveAdmin(ctx context.Context, port int, m *telemetry.Metrics, ready func(context.Context) error) {
	s.run(func() error {
		return telemetry.ServeAdmin(ctx, fmt.Sprintf("127.0.0.1:%d", port), m, ready, s.cfg.Log)
	})
}

func (s *Stack) run(f func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Log.Error("service stopped", "err", err.Error())
			select {
			case s.errs <- err:
			default:
			}
		}
	}()
}

// Errors reports a service that stopped on its own.
func (s *Stack) Errors() <-chan error { return s.errs }

// Close stops every service and waits for them.
func (s *Stack) Close() {
	s.cancel()
	s.wg.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// RegionalURL is where a cluster's regional instance listens (behind the router).
func (s *Stack) RegionalURL(cluster string) string {
	return s.regionalURLs[cluster]
}
