package regional

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/cpushare"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	customEvents "github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/exports"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/products"
	"github.com/tallyhq/tally/regional/publications"
	"github.com/tallyhq/tally/regional/templates"
	"github.com/tallyhq/tally/regional/usage"
	"github.com/tallyhq/tally/regional/vouchers/bulk"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

// The steps of New before and after the domains are wired: what every
// domain runs on, and the server they are mounted on.

// withDefaults is cfg with what it leaves unset filled in; the cluster's
// name is required.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Cluster == "" {
		return cfg, errors.New("regional: the cluster name is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns()
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 500 * time.Millisecond
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.CPUShare.Log == nil {
		cfg.CPUShare.Log = cfg.Log
	}
	if cfg.Worker.Log == nil {
		cfg.Worker.Log = cfg.Log
	}
	return cfg, nil
}

// open fills in cfg's defaults, checks the secrets and connects to the
// cluster's database and to the directory, each past its server's check.
func open(ctx context.Context, cfg Config) (*App, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	signer, err := identity.NewSigner(cfg.IdentitySecret, cfg.IdentitySecretPrevious)
	if err != nil {
		return nil, err
	}
	operator, err := identity.NewSigner(cfg.OperatorSecret, cfg.OperatorSecretPrevious)
	if err != nil {
		return nil, fmt.Errorf("regional: operator secret: %w", err)
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, db.Options{Name: "tally-regional-" + cfg.Cluster, MaxConns: cfg.MaxConns})
	if err != nil {
		return nil, err
	}
	// A CockroachDB too old for the writes run at READ COMMITTED, or with it
	// off, is refused at start. A database not reachable yet is no reason
	// to stop: the instance reports itself unready until it is, and until
	// the server has passed the check (Ready).
	server := db.NewServerGate(pool, "the cluster's database")
	if err := server.Start(ctx, 2*time.Second); err != nil {
		pool.Close()
		return nil, fmt.Errorf("regional: %w", err)
	}
	tpool, err := db.Open(ctx, cfg.TenancyURL, db.Options{Name: "tally-regional-" + cfg.Cluster, MaxConns: 8})
	if err != nil {
		pool.Close()
		return nil, err
	}
	tserver := db.NewServerGate(tpool, "the directory (tenancy database)")
	if err := tserver.Start(ctx, 2*time.Second); err != nil {
		pool.Close()
		tpool.Close()
		return nil, fmt.Errorf("regional: %w", err)
	}
	return &App{cfg: cfg, pool: pool, server: server, tserver: tserver, signer: signer, operator: operator, tenancy: tpool}, nil
}

// platform builds what every domain runs on: the directory's resolver, the
// identities already seen, usage, the schema check, each project's share of
// the connections and the CPU, the task registry and its worker, and the
// webhook notices.
func (a *App) platform() {
	cfg := a.cfg
	a.seen = identity.NewSeen(200_000)
	a.tasks = async.NewRegistry()
	a.resolver = tenancy.NewResolver(a.tenancy, tenancy.ResolverOptions{Log: cfg.Log})
	a.usage = usage.NewCounter(a.pool, cfg.Log)
	a.schema = dbschema.NewGate(a.pool, Migrations, MigrationsDir, dbschema.GateOptions{Name: "the cluster's database",
		Fix: "migrate it (`tally migrate --regional-url`, the pod's migrate init container) first"})
	a.bulkhead = db.NewBulkhead(cfg.BulkheadWait)
	a.cpu = cpushare.New(cfg.CPUShare)
	a.notify = webhooks.Register(a.tasks, a.pool, a.resolver, cfg.Webhooks)
	a.worker = async.NewWorker(a.pool, a.tasks, cfg.Worker)
	if cfg.Metrics != nil {
		cfg.Metrics.Register(a.worker.Collectors()...)
		cfg.Metrics.Register(a.bulkhead.Collectors()...)
		cfg.Metrics.Register(a.cpu.Collectors()...)
	}
}

// newServer is the server the API is mounted on: the probes, and on every
// other request the router's identity (authenticate), usage and the API
// version.
func (a *App) newServer() *echo.Echo {
	// The product jobs take up to 10 MB (an imported file), as the router does.
	e := httpx.New(httpx.Config{Service: "tally-regional", Log: a.cfg.Log, Metrics: a.cfg.Metrics, TrustRequestID: true,
		LargeBodies:    slices.Concat(products.LargeBodies, bulk.LargeBodies, customers.LargeBodies, orders.LargeBodies, []string{customEvents.BulkPath}),
		LargeBodyLimit: "10M"})
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		if err := a.Ready(c.Request().Context()); err != nil {
			return err
		}
		return c.String(http.StatusOK, "ready\n")
	})
	// Root-level rather than group middleware: a group with middleware adds a
	// catch-all route, which would turn every 405 into a 404.
	// The versions' differences, in one place: handlers serve the newest.
	// (On e, not the /v1 group: a group's middleware makes echo answer 404
	// for a known path's other methods, not 405.)
	a.versions = apiversion.Interface()
	e.Use(a.authenticate, a.usage.Middleware, a.versions.Middleware(func(c echo.Context) string {
		if id, ok := identity.From(c.Request().Context()); ok && id.APIVersion != "" {
			return id.APIVersion
		}
		return apiversion.Latest
	}))
	return e
}

// newExports is the export service, its download links signed with the
// identity secrets, which lists loyalty cards through loy and exports the
// objects of the owners that give their sources.
func (a *App) newExports(loy *loyalty.Service, gifts exports.Gifts) *exports.Service {
	cfg := a.cfg
	return exports.NewService(a.pool, a.notify, loy, gifts, a.tasks, cfg.Clock,
		dltoken.New(cfg.IdentitySecret, cfg.IdentitySecretPrevious), exports.Options{
			PartRows: cfg.ExportPartRows, Retention: cfg.ExportRetention, DownloadURL: a.downloadURL, ChunkBytes: cfg.ExportChunkBytes},
		slices.Concat(orders.ExportSources(), products.ExportSources(), publications.ExportSources(),
			customers.ExportSources(), loyalty.ExportSources())...)
}

// newReports is the writer of bulk jobs' reports, kept and served as
// export files are, with their retention.
func (a *App) newReports() *exports.Reports {
	cfg := a.cfg
	return exports.NewReports(a.pool, cfg.Clock, dltoken.New(cfg.IdentitySecret, cfg.IdentitySecretPrevious),
		exports.Options{Retention: cfg.ExportRetention, DownloadURL: a.downloadURL})
}

// serveInternal mounts management's operator calls on /internal/v1:
// parked tasks, webhook deliveries, usage, campaign templates.
func (a *App) serveInternal(e *echo.Echo) {
	internal := e.Group("/internal/v1")
	async.RegisterInternal(internal, a.pool)
	webhooks.RegisterInternal(internal, a.pool)
	a.usage.RegisterInternal(internal)
	templates.RegisterInternal(internal, a.templates)
}
