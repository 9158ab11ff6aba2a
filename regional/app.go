package regional

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/dbschema"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/cpushare"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/clientapi"
	"github.com/tallyhq/tally/regional/collections"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/earning"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/erasure"
	customEvents "github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/exports"
	"github.com/tallyhq/tally/regional/locations"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/loyalty/program"
	"github.com/tallyhq/tally/regional/metaschemas"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/products"
	"github.com/tallyhq/tally/regional/promotions"
	"github.com/tallyhq/tally/regional/publications"
	"github.com/tallyhq/tally/regional/qualifications"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/referrals"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/segments"
	"github.com/tallyhq/tally/regional/templates"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/usage"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/vouchers/bulk"
	"github.com/tallyhq/tally/regional/vouchers/campaign"
	"github.com/tallyhq/tally/regional/wallet"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

// Config of a regional instance.
type Config struct {
	Cluster        string // the cluster this instance serves; identities for others are refused
	DatabaseURL    string
	TenancyURL     string // the directory, for webhook configurations and project secrets
	IdentitySecret []byte
	// OperatorSecret verifies the operator calls of management on
	// /internal (parked tasks, deliveries, usage): a credential of their
	// own, so no identity the router signs reaches them.
	OperatorSecret []byte
	// IdentitySecretPrevious and OperatorSecretPrevious, when set, are
	// accepted too, never used to sign: during a rotation the services
	// take the new secret first, with the old as previous, while the
	// router (management) still signs with the old one.
	IdentitySecretPrevious []byte
	OperatorSecretPrevious []byte
	MaxConns               int32
	// BulkheadWait is how long a project's request waits for a place when
	// the project holds its whole share of the database connections (its
	// plan's cluster_share of MaxConns) before it is answered 503
	// (default 2 s).
	BulkheadWait time.Duration
	// CPUShare paces a project over its share of this instance's CPU
	// while the instance is busy (cpushare; the share is its plan's
	// cluster_share, as for the connections).
	CPUShare      cpushare.Options
	Worker        async.WorkerOptions
	Webhooks      webhooks.Options
	WatchInterval time.Duration // directory change polling (default 500ms)
	Log           *slog.Logger
	Metrics       *telemetry.Metrics
	// Clock is what time-driven work reads (nil: the wall clock): pending
	// points activating, points expiring. SweepInterval is how often that
	// work looks for what is due (default a minute).
	Clock         *clock.Clock
	SweepInterval time.Duration
	// BinRetention is how long deleted products and SKUs stay in the bin
	// before the sweep removes them for good (default 30 days).
	BinRetention time.Duration
	// Exports: the most rows in one file (default 1,000,000), how long a
	// file is kept (default 30 days), and the base URL of the cluster's
	// download host for result.url (default https:// and the cluster's
	// download host in the directory).
	ExportPartRows  int
	ExportRetention time.Duration
	DownloadBaseURL string
	// ExportChunkBytes is the largest stored chunk of an export's file
	// (default 256 KiB; tests make it small).
	ExportChunkBytes int
}

// DefaultMaxConns is the database pool's size when none is configured. A
// request keeps its connection while the database commits (a WAL flush),
// so the pool is deeper than the CPU count: with pgx's default, max(4,
// CPUs), 32 clients queued for 4 connections while the database sat half
// idle. On a machine whose disk flushes fast, 8 connections (4 per CPU)
// held 32 clients' point additions to 2,297-2,654/s; 16 gave
// 2,734-2,862/s, and 32 no more (2,932/s).
func DefaultMaxConns() int32 { return int32(max(16, 8*runtime.NumCPU())) }

// App is a regional instance.
type App struct {
	cfg      Config
	pool     *db.Pool
	echo     *echo.Echo
	signer   *identity.Signer // the router's identities
	operator *identity.Signer // management's operator calls
	seen     *identity.Seen   // identities of writes already presented
	// templates answers the management API's list of a project's
	// campaign templates (serveInternal).
	templates *templates.Service
	versions  *apiversion.Registry
	tasks     *async.Registry
	worker    *async.Worker
	tenancy   *db.Pool
	resolver  *tenancy.Resolver
	schema    *dbschema.Gate // the cluster's database against Migrations
	server    *db.ServerGate // the cluster's database server against db.CheckServer
	tserver   *db.ServerGate // the directory's
	bulkhead  *db.Bulkhead
	cpu       *cpushare.Governor
	usage     *usage.Counter
	notify    *webhooks.Service
	loyalty   *loyalty.Service
	earning   *earning.Service
	bin       *bin.Bin
	exports   *exports.Service
}

// New connects to the cluster's database and wires the application API.
func New(ctx context.Context, cfg Config) (*App, error) {
	a, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.platform()
	e := a.newServer()
	v1 := e.Group("/v1")
	var s services
	a.customersFloor(v1, &s)
	a.programsFloor(v1, &s)
	a.engineFloor(v1, &s)
	a.catalogueFloor(v1, &s)
	// The client-side API (/client/v1): the /v1 twins above, behind the
	// project's client-side toggles and a bound token's customer.
	clientapi.Register(e, clientapi.Deps{Project: a.resolver.Project, Customer: s.cust.Get, Versions: a.versions})
	a.serveInternal(e)
	a.echo = e
	return a, nil
}

// services are the domain services New builds, floor by floor: each
// floor's constructors take what the floors below it made.
type services struct {
	meta    *metaschemas.Checker
	locs    *locations.Service
	segs    *segments.Service
	cust    *customers.Service
	ord     *orders.Service
	reports *exports.Reports
	camps   *campaigns.Service
	progs   *program.Service
	colls   *collections.Service
	rules   *validation.Service
	vs      *vouchers.Service
	vcamps  *campaign.Service
	pubs    *publications.Service
	red     *redemptions.Service
	promos  *promotions.Service
	refs    *referrals.Service
	eng     *engine.Engine
}

// customersFloor: metadata schemas, locations, segments, customers (with
// their erasure) and orders.
func (a *App) customersFloor(v1 *echo.Group, s *services) {
	pool, notify, cfg := a.pool, a.notify, a.cfg
	// Every write of a resource's metadata is checked against the
	// project's metadata schema for it, read from the directory's cache.
	meta := metaschemas.New(a.resolver)
	metaschemas.Register(v1, meta)
	// Locations, which segments', collections' and validation rules'
	// $in_location conditions name.
	locs := locations.NewService(pool, cfg.Clock)
	locations.Register(v1, locs)
	// Segments follow every customer write (in the asynchronous phase).
	segs := segments.NewService(pool, notify, locs, customEvents.Counts{}, a.tasks, cfg.Clock)
	segments.Register(v1, segs)
	// A deleted customer takes their referral holdings and custom events;
	// a permanently deleted one is erased from every table that holds
	// their personal data, each by its owner (docs/architecture.md,
	// Permanent deletion).
	cust := customers.NewService(pool, notify, meta, segs, customers.Erasers{
		Now: []erasure.Eraser{customEvents.EraseCustomer, segs.EraseCustomer, orders.EraseCustomer, publications.EraseCustomer,
			redemptions.EraseCustomer, stacked.EraseCustomer, exports.StopRunning},
		// The outbox last: its rows stay locked until the task commits, and
		// a locked delivery is skipped by every claim, so the export
		// files' scan (long, and waiting on a running export's row) runs
		// before, not while her notices are held. The pending jobs' inputs
		// between: it locks only the inputs that name her (their jobs skip
		// her items whatever they read), after the files' long scan.
		Later: []erasure.Eraser{exports.EraseCustomer, async.EraseInputs, async.EraseCustomer},
		After: []func(context.Context, string) error{notify.AwaitSends}}, referrals.DropCustomer, customEvents.DropCustomer)
	reports := a.newReports()
	cust.HandleJobs(a.tasks, reports)
	ord := orders.NewService(pool, notify, meta, cust, cfg.Clock, a.tasks.Wake)
	ord.HandleJobs(a.tasks)
	orders.Register(v1, ord)
	s.meta, s.locs, s.segs, s.cust, s.reports, s.ord = meta, locs, segs, cust, reports, ord
}

// programsFloor: campaigns' rows, the loyalty program and earning,
// collections and validation rules, vouchers, publications, reward
// redemptions, promotion tiers, referral programs and the wallet.
func (a *App) programsFloor(v1 *echo.Group, s *services) {
	pool, notify, cfg := a.pool, a.notify, a.cfg
	meta, locs, segs, cust, ord, reports := s.meta, s.locs, s.segs, s.cust, s.ord, s.reports
	// The campaigns' rows, whose kinds (loyalty programs, vouchers,
	// promotions, referral programs) are built on them.
	camps := campaigns.NewService(pool, notify, meta, cfg.Clock)
	a.loyalty = loyalty.NewService(pool, notify, camps, earning.TierMoves{}, cfg.Clock)
	// The loyalty programs over their cards and ledger, and the packages
	// built on them.
	s.progs = program.NewService(pool, camps, cust, a.loyalty)
	program.Register(v1, s.progs)
	// Validation rules, which vouchers, promotion tiers and earning rules name.
	colls := collections.NewService(pool, locs, cfg.Clock)
	collections.Register(v1, colls)
	rules := validation.NewService(pool, cfg.Clock, locs, colls)
	validation.Register(v1, rules)
	a.earning = earning.NewService(pool, notify, a.loyalty, a.tasks, a.resolver, meta, earningRules{rules, segs}, cfg.Clock)
	earning.Register(v1, a.earning)
	vs := vouchers.NewService(pool, notify, meta, camps, cfg.Clock, publications.PublishCounts, referrals.RecordReferrer(cfg.Clock))
	vouchers.Register(v1, vs)
	// Discount and gift campaigns (and referral codes') over vouchers.
	vcamps := campaign.NewService(pool, vs, camps, cfg.Clock)
	campaign.Register(v1, vcamps, a.loyalty)
	categories.Register(v1, categories.NewService(pool, cfg.Clock, campaigns.FollowCategory))
	bulk.New(pool, vs, cfg.Clock, reports).Register(v1, a.tasks, a.tasks.Wake)
	pubs := publications.NewService(pool, notify, cust, vs, a.loyalty, meta, cfg.Clock)
	publications.Register(v1, pubs)
	// Reward redemptions: a CAMPAIGN reward publishes and credits through
	// pubs and vs in the redemption's transaction.
	red := redemptions.NewService(a.loyalty, pool, notify, ord, meta, pubs, vs, cfg.Clock)
	redemptions.Register(v1, red)
	promos := promotions.NewService(pool, camps, rules, meta, cfg.Clock)
	// Referral programs: their campaigns, the holders of their codes, and
	// referees converted by custom event or by redemption.
	refs := referrals.NewService(pool, notify, camps, cust, a.loyalty, vs, vcamps, a.resolver.EventSchemas, segs, cfg.Clock)
	referrals.Register(v1, refs)
	customers.Register(v1, cust, refs, segs)
	// A customer's wallet: the vouchers, cards and referral codes they
	// hold, each kind read from its owner.
	wallet.Register(v1, wallet.New(cust, cfg.Clock, vs.Holdings, a.loyalty.Holdings, refs.Holdings))
	s.camps, s.colls, s.rules, s.vs, s.vcamps, s.pubs, s.red, s.promos, s.refs = camps, colls, rules, vs, vcamps, pubs, red, promos, refs
}

// engineFloor: the promotion engine, qualifications, the /v1/campaigns
// façade over every kind, tiers and rewards.
func (a *App) engineFloor(v1 *echo.Group, s *services) {
	pool, notify, cfg := a.pool, a.notify, a.cfg
	meta, segs, cust, ord, camps, rules, vs, pubs, red, promos, refs := s.meta, s.segs, s.cust, s.ord, s.camps, s.rules, s.vs, s.pubs, s.red, s.promos, s.refs
	// The promotion engine (stacked validation, redemption), the promotion
	// tiers it applies without codes, and qualifications, which it judges.
	eng := engine.New(engine.Deps{Pool: pool, Notify: notify, Vouchers: vs, Rules: rules, Customers: cust,
		Orders: ord, Redemptions: red, Clock: cfg.Clock, StackingRules: a.resolver.StackingRules, Tiers: promos,
		Referrals: refs, Segments: segs})
	engine.Register(v1, eng)
	qualifications.Register(v1, qualifications.New(eng, promos))
	promotions.Register(v1, promos)
	// /v1/campaigns serves every type through its kind.
	discounts := campaign.NewKind(s.vcamps, "DISCOUNT_COUPONS")
	campaigns.Register(v1, campaigns.NewRegistry(camps, a.tasks, map[string]campaigns.Kind{
		"LOYALTY_PROGRAM":  program.NewKind(s.progs, red, a.earning),
		"DISCOUNT_COUPONS": discounts,
		"GIFT_VOUCHERS":    campaign.NewKind(s.vcamps, "GIFT_VOUCHERS"),
		"PROMOTION":        promotions.NewKind(promos),
		"REFERRAL_PROGRAM": referrals.NewKind(refs, discounts),
	}), campaigns.Counters{Stacked: eng, Publications: pubs})
	tiers.Register(v1, tiers.NewService(pool, cfg.Clock, a.loyalty, a.earning.RuleIDs, red.RewardIDs, meta))
	rewards.Register(v1, rewards.NewService(pool, notify, cfg.Clock, red, meta))
	s.eng = eng
}

// catalogueFloor: products, templates, the bin, custom events, exports
// and async actions.
func (a *App) catalogueFloor(v1 *echo.Group, s *services) {
	pool, notify, cfg := a.pool, a.notify, a.cfg
	meta, reports, locs, segs, cust, camps, colls, rules, vs, promos, refs := s.meta, s.reports, s.locs, s.segs, s.cust, s.camps, s.colls, s.rules, s.vs, s.promos, s.refs
	prods := products.NewService(pool, notify, meta, a.tasks, cfg.Clock, reports)
	products.Register(v1, prods)
	// Templates are made from campaigns and tiers; a copy from another
	// project carries its products, collections, segments and locations.
	a.templates = templates.NewService(pool, cfg.Clock, s.vcamps, promos, rules,
		templates.Objects{Products: prods, Collections: colls, Segments: segs, Locations: locs})
	templates.Register(v1, a.templates)
	// The bin, and how what it holds leaves it for good: a deleted
	// campaign's vouchers (of any type) go in CAMPAIGN.VOUCHERS_DELETE, at
	// once or when its bin entry is removed.
	a.bin = bin.New(pool, cfg.Clock, cfg.BinRetention, bin.Removers{"campaign": camps.RemoveBinned,
		"voucher": vs.RemoveBinned, "product": prods.RemoveBinnedProduct, "sku": prods.RemoveBinnedSKU})
	bin.Register(v1, a.bin)
	customEvents.Register(v1, customEvents.NewService(customEvents.Deps{Pool: pool, Notify: notify, Customers: cust, Watch: segs,
		Loyalty: a.loyalty, Earning: a.earning, Schemas: a.resolver, Referrals: refs, Tasks: a.tasks, Clock: cfg.Clock}))
	a.exports = a.newExports(a.loyalty, vs)
	exports.Register(v1, a.exports)
	async.Register(v1, pool)
}

// authenticate admits only requests the router vouched for, for this cluster.
func (a *App) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := c.Request().URL.Path; p == "/healthz" || p == "/readyz" {
			return next(c)
		}
		// Every identity is good for this cluster and this one request:
		// the router's for the interface, management's operator credential
		// for /internal.
		r := c.Request()
		// A task queued by the request brings this instance's worker to
		// its busy pace (async.WorkerOptions.IdlePoll).
		base := async.WithRegistry(r.Context(), a.tasks)
		if strings.HasPrefix(r.URL.Path, "/internal/") {
			id, err := a.operator.VerifyRequest(r, identity.AudienceOperator, a.cfg.Cluster, time.Now(), a.seen)
			if err != nil || id.Kind != identity.KindManagement {
				return apierr.Unauthorized("Internal endpoints are for the management service.")
			}
			c.SetRequest(r.WithContext(identity.With(base, id)))
			return next(c)
		}
		id, err := a.signer.VerifyRequest(r, identity.AudienceRegional, a.cfg.Cluster, time.Now(), a.seen)
		if err != nil || id.ProjectID == "" || (id.Kind != identity.KindApp && id.Kind != identity.KindClient && id.Kind != identity.KindDownload) {
			return apierr.Unauthorized("Requests reach this service only through the platform's router.")
		}
		// Client keys reach the client-side API only.
		if id.Kind == identity.KindClient && !strings.HasPrefix(r.URL.Path, "/client/") {
			return apierr.Unauthorized("Client-side keys reach /client/v1 only.")
		}
		// A download link's identity reads its one export's file.
		if id.Kind == identity.KindDownload && ((r.Method != http.MethodGet && r.Method != http.MethodHead) ||
			r.URL.Path != "/v1/exports/"+id.KeyID+"/download") {
			return apierr.Unauthorized("A download token reads only the file of its export.")
		}
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("tally.project_id", id.ProjectID),
			attribute.String("tally.api_version", id.APIVersion))
		ctx := identity.With(base, id)
		share := a.planShare(ctx, id.ProjectID)
		ctx = a.bulkhead.For(ctx, id.ProjectID, db.Share(a.cfg.MaxConns, share))
		c.SetRequest(r.WithContext(ctx))
		if id.Kind == identity.KindDownload {
			return next(c) // a file streamed for minutes holds a place only while it reads the database
		}
		// The project's share of this instance covers its whole requests,
		// not only their database work: a project whose requests pile up
		// waits in its own line before it costs this instance anything.
		// First its share of the CPU (a paced project's turn), then of the
		// connections.
		done, err := a.cpu.Admit(ctx, id.ProjectID, share)
		if err != nil {
			return err
		}
		defer done()
		leave, err := db.Hold(ctx)
		if err != nil {
			return err
		}
		defer leave()
		return next(c)
	}
}

// planShare is a project's share of this instance, its plan's
// cluster_share (the default share when the directory cannot say): of the
// database connections it may hold at once, and of the CPU while the
// instance is busy.
func (a *App) planShare(ctx context.Context, projectID string) float64 {
	if p, err := a.resolver.Project(ctx, projectID); err == nil {
		if pl, err := a.resolver.Plan(ctx, p.Plan); err == nil {
			return pl.Share()
		}
	}
	return tenancy.DefaultClusterShare
}

// downloadURL is the base of the cluster's download links.
func (a *App) downloadURL(ctx context.Context) (string, error) {
	if a.cfg.DownloadBaseURL != "" {
		return a.cfg.DownloadBaseURL, nil
	}
	c, err := a.resolver.ClusterByName(ctx, a.cfg.Cluster)
	if err != nil {
		return "", err
	}
	host := c.DownloadHost
	if host == "" {
		host = c.APIHost
	}
	return "https://" + host, nil
}

// Exports is the export service.
func (a *App) Exports() *exports.Service { return a.exports }

// Versions is where the API versions' request and response transforms
// are registered (apiversion.Transform).
func (a *App) Versions() *apiversion.Registry { return a.versions }

// Webhooks raises webhook notices in a writer's transaction.
func (a *App) Webhooks() *webhooks.Service { return a.notify }

// Tasks is the registry of background work; domains add their handlers.
func (a *App) Tasks() *async.Registry { return a.tasks }

// RunBackground runs the outbox workers, the directory watch and the usage
// flusher until ctx ends, then lets running tasks finish.
func (a *App) RunBackground(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(7)
	go func() { defer wg.Done(); a.resolver.Watch(ctx, a.cfg.WatchInterval) }()
	go func() { defer wg.Done(); a.cpu.Run(ctx) }()
	go func() {
		defer wg.Done()
		a.loyalty.Run(ctx, a.cfg.SweepInterval, func(err error) { a.cfg.Log.Error("points expiry sweep", "err", err) })
	}()
	go func() {
		defer wg.Done()
		a.earning.Run(ctx, a.cfg.SweepInterval, func(err error) { a.cfg.Log.Error("pending points sweep", "err", err) })
	}()
	go func() {
		defer wg.Done()
		a.bin.Run(ctx, a.cfg.SweepInterval, func(err error) { a.cfg.Log.Error("bin retention sweep", "err", err) })
	}()
	go func() {
		defer wg.Done()
		a.exports.Run(ctx, a.cfg.SweepInterval, func(err error) { a.cfg.Log.Error("export retention sweep", "err", err) })
	}()
	go func() { defer wg.Done(); a.usage.Run(ctx, 2*time.Second) }()
	a.worker.Run(ctx)
	wg.Wait()
}

// Handler serves the application API.
func (a *App) Handler() http.Handler { return a.echo }

// Pool is the instance's database pool.
func (a *App) Pool() *db.Pool { return a.pool }

// Ready reports whether the cluster's database and the directory answer,
// each with a schema as new as this binary needs (readiness; liveness,
// /healthz, reads no database).
func (a *App) Ready(ctx context.Context) error {
	if err := a.pool.Ping(ctx); err != nil {
		return fmt.Errorf("the cluster's database: %w", db.Classify(err))
	}
	// A server that could not be checked at start is checked now: one Tally
	// does not run on (an old CockroachDB, READ COMMITTED off) is never
	// served, and the probe says what to change.
	if err := a.server.Check(ctx); err != nil {
		return err
	}
	// The pod's init container migrates it before this starts; `tally
	// regional` run without it must not serve the old schema either.
	if err := a.schema.Check(ctx); err != nil {
		return schemaError("the cluster's database", err)
	}
	// Every request resolves its project's plan, and webhooks, event
	// schemas and stacking rules live in the directory: an instance that
	// cannot reach it would answer errors, so it is not ready either.
	if err := a.tenancy.Ping(ctx); err != nil {
		return fmt.Errorf("the directory (tenancy database): %w", db.Classify(err))
	}
	if err := a.tserver.Check(ctx); err != nil {
		return err
	}
	// Management's release migrates the directory; this one may roll out
	// first (another region's, say) and must wait for it.
	if err := a.resolver.CheckSchema(ctx); err != nil {
		return schemaError("the directory (tenancy database)", err)
	}
	return nil
}

// schemaError is a failed schema check of the database called name: a
// schema behind says so itself, a failed read says which database.
func schemaError(name string, err error) error {
	if errors.Is(err, dbschema.ErrBehind) {
		return err
	}
	return fmt.Errorf("%s: %w", name, db.Classify(err))
}

// Close releases the database pools.
func (a *App) Close() {
	a.pool.Close()
	a.tenancy.Close()
}

// earningRules evaluates the validation rule an earning rule names
// (earning.ValidationRules) on the event's context, the customer's
// segments read only for a rule that reads them, as the engine does.
type earningRules struct {
	*validation.Service
	segs *segments.Service
}

func (r earningRules) Passes(ctx context.Context, q db.Querier, projectID, ruleID string, in rules.Input,
	cust *customers.Customer) (bool, error) {
	ids := []string{ruleID}
	p, err := r.Prepare(ctx, q, projectID, ids, in.Order)
	if err != nil {
		return false, err
	}
	if cust != nil && in.Customer != nil && p.ReadsSegments(ids) {
		if in.Customer.Segments, err = r.segs.Of(ctx, q, projectID, *cust); err != nil {
			return false, err
		}
	}
	return p.Run(ids, in)[0].Valid, nil
}
