// Command bench is the benchmark harness behind `make bench`. It starts the
// platform over local PostgreSQL servers (default settings, as in
// production), and drives one load generator (fortio) at the same regional
// request three ways in one run: straight to the regional instance, through
// the router, and through nginx as a plain keep-alive reverse proxy in front
// of the same instance. It writes its figures to docs/benchmarks.md.
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	flog "fortio.org/log"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jackc/pgx/v5"
	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/pglocal"
	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "length of each measured phase")
	out := flag.String("out", "docs/benchmarks.md", "where to write the figures")
	only := flag.String("only", "", "run only these benchmarks, comma-separated, in the usual order: loyalty, earning, products, customers, orders, targeting, vouchers, rewards, engine, scale, hotcode, exports, mixed, events, cors, outbox, noisy, ring, webhooks, router")
	nginxBin := flag.String("nginx", "/usr/sbin/nginx", "nginx binary")
	flag.StringVar(&memProfile, "memprofile", "", "write the allocations of the router's first OAuth Bearer saturation round here (and those before it to FILE.base, for pprof -diff_base)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile here: of the router's first OAuth Bearer saturation round, the webhook run, the point additions, the customer import, the engine section's qualifications (and its validations and redemptions to FILE.validation and FILE.redemption), the scale section's qualifications at 100 campaigns or the hot code's tries, the events at 500/s (with -only)")
	flag.IntVar(&customersRows, "customers-rows", 1_000_000, "customers the customers section imports (fewer to try it on a shared machine)")
	flag.IntVar(&ordersRows, "orders-rows", 100_000, "orders the orders section imports (fewer to try it on a shared machine)")
	flag.Float64Var(&scaleFactor, "scale-factor", 1, "the scale section's data sizes times this (0.01 to try it on a shared machine)")
	flag.IntVar(&segmentCustomers, "segment-customers", 1_000_000, "customers the targeting section's segment is evaluated over (fewer to try it on a shared machine)")
	flag.Func("scale-engine-sizes", "campaigns and tiers of the scale section's engine passes, comma-separated (default 100,1000,10000; fewer to try it)",
		setScaleEngineSizes)
	flag.BoolVar(&engineCPUOnly, "engine-cpu-only", false, "the engine section measures only its three phases at 200/s, without the client-side rounds and the saturation (to profile them on a shared machine)")
	flag.IntVar(&engineCPURounds, "engine-cpu-rounds", 5, "rounds of the engine's three paths, in turn, each under a CPU profile of its own (half a -duration each), after its phases; with -engine-cpu-ab, the pairs of rounds")
	flag.BoolVar(&engineCPUServe, "engine-cpu-serve", false, "internal: a side of -engine-cpu-ab (runs a round per line on stdin)")
	flag.StringVar(&engineCPUAB, "engine-cpu-ab", "", "compare the engine's CPU per request of the bench binary `OLD` (built from the old code with this bench) with this one's: both run side by side, their rounds alternating ABBA; the report goes to stderr")
	hammer := flag.String("hammer", "", "internal: run the noisy neighbour's clients (ROUTER,APPID,TOKEN,CARD) until interrupted")
	flag.Parse()
	if *hammer != "" {
		hammerMain(*hammer)
		return
	}
	if memProfile != "" {
		runtime.MemProfileRate = 64 << 10 // finer than the default 512 KiB
	}
	flog.SetLogLevel(flog.Warning)
	runtimex.TuneGC() // as `tally` itself does
	if engineCPUAB != "" {
		if err := benchEngineCPUAB(engineCPUAB, *duration, engineCPURounds); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*duration, *out, *nginxBin, *only); err != nil {
		log.Fatal(err)
	}
}

var cpuProfile, memProfile string

// engineCPUOnly is the -engine-cpu-only flag's.
var engineCPUOnly bool

func run(d time.Duration, outPath, nginxBin, only string) error {
	ctx := context.Background()
	// Tracing on, as in production: every span is batched to an exporter.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(ctx)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	dir, err := os.MkdirTemp("", "tally-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	servers, err := startServers(ctx, dir)
	defer func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}()
	if err != nil {
		return err
	}
	secret, _ := hex.DecodeString(ids.Secret(32))
	stack, err := devstack.Start(ctx, devstack.Config{
		TenancyURL:     servers[0].URL("tally"),
		Regions:        []devstack.Region{{Cluster: "api", Region: "europe", DatabaseURL: servers[1].URL("tally")}},
		IdentitySecret: secret, Log: telemetry.NewLogger(os.Stderr, 8),
		// The receiver is on loopback.
		Webhooks: webhooks.Options{AllowPrivateTargets: true},
		// The client-side validations come through loopback from many
		// addresses, as through a load balancer.
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	b, err := benchProjects(ctx, stack)
	if err != nil {
		return err
	}
	b.servers, b.secret, b.d = servers, secret, d
	picked := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		picked[strings.TrimSpace(name)] = true
	}
	for _, sec := range b.sections() {
		if only != "" && !picked[sec.name] {
			continue
		}
		profile := ""
		if only == sec.name {
			profile = cpuProfile
		}
		report, err := sec.run(profile)
		if err != nil {
			return err
		}
		fmt.Fprint(os.Stderr, report)
		if err := replaceSection(outPath, sec.name, report); err != nil {
			return err
		}
	}
	if only != "" && !picked["router"] {
		return nil
	}
	return benchRouter(stack, b.p, b.unlimited, secret, dir, nginxBin, d, outPath)
}

// startServers starts the PostgreSQL servers under dir, the directory's
// (tenancy) and the api cluster's, each with its database; those started
// are answered with an error too, to be stopped.
func startServers(ctx context.Context, dir string) ([]*pglocal.Server, error) {
	var servers []*pglocal.Server
	for _, name := range []string{"tenancy", "api"} {
		s, err := pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(dir, name)})
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
		if err := s.CreateDatabase(ctx, "tally"); err != nil {
			return servers, err
		}
	}
	return servers, nil
}

// benchRun is what the sections run against: the platform, its servers,
// the bench's projects and management key, and each phase's length.
type benchRun struct {
	stack        *devstack.Stack
	servers      []*pglocal.Server
	secret       []byte
	d            time.Duration
	mgmt         devstack.ManagementCredentials
	p, unlimited devstack.ProjectCredentials
}

// benchProjects makes the bench's plans, management key and projects.
// The bench's project is on a plan whose limits it never reaches, so that
// every request goes through the limiter's leases; the router section
// also measures a project without limits, which skips them. Both may hold
// the whole regional instance, as a project alone on its cluster may (the
// noisy neighbour section measures shares).
func benchProjects(ctx context.Context, stack *devstack.Stack) (*benchRun, error) {
	if err := db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		if err := tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: "bench-unlimited", Features: []string{"webhooks"}, ClusterShare: 1}); err != nil {
			return err
		}
		return tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: "bench", Features: []string{"webhooks"},
			RequestsPerMinute: 1_000_000_000, RequestsPerHour: 1_000_000_000, ClusterShare: 1})
	}); err != nil {
		return nil, err
	}
	b := &benchRun{stack: stack}
	var err error
	if b.mgmt, err = stack.CreateManagementKey(ctx, "bench"); err != nil {
		return nil, err
	}
	if b.p, err = stack.CreateProject(ctx, "Bench", "api", "bench"); err != nil {
		return nil, err
	}
	if b.unlimited, err = stack.CreateProject(ctx, "Bench without limits", "api", "bench-unlimited"); err != nil {
		return nil, err
	}
	return b, nil
}

// section is a part of the bench that writes one report.
type section struct {
	name string
	run  func(profile string) (string, error)
}

// sections are the sections that write one report each, in their order;
// the router's, after them, needs nginx. profile is cpuProfile when the
// section runs alone.
func (b *benchRun) sections() []section {
	stack, p, servers, d := b.stack, b.p, b.servers, b.d
	creds := devstack.Credentials{Management: b.mgmt}
	return []section{
		{"loyalty", func(profile string) (string, error) {
			lr, err := benchLoyalty(stack, p, servers[1], d, profile)
			return loyaltyReport(lr), err
		}},
		{"earning", func(string) (string, error) {
			er, err := benchEarning(stack, p, d)
			return earningReport(er), err
		}},
		{"products", func(string) (string, error) {
			pr, err := benchProducts(stack, p, servers[1])
			return productsReport(pr), err
		}},
		{"customers", func(profile string) (string, error) {
			cr, err := benchCustomers(stack, p, servers[1], profile)
			return customersReport(cr), err
		}},
		{"orders", func(string) (string, error) {
			or, err := benchOrders(stack, p, servers[1])
			return ordersReport(or), err
		}},
		{"targeting", func(string) (string, error) {
			tr, err := benchTargeting(stack, p, servers[1], d)
			return targetingReport(tr), err
		}},
		{"vouchers", func(string) (string, error) {
			vr, err := benchVouchers(stack, p, servers[1])
			return vouchersReport(vr), err
		}},
		{"rewards", func(string) (string, error) {
			rr, err := benchRewards(stack, p, d)
			return rewardsReport(rr), err
		}},
		{"engine", func(profile string) (string, error) {
			er, err := benchEngine(stack, p, servers[1], d, profile)
			return engineReport(er), err
		}},
		{"scale", func(profile string) (string, error) { return runScale(b, profile) }},
		{"hotcode", func(profile string) (string, error) {
			hr, err := benchHotcode(stack, p, servers[1], d, profile)
			return hotcodeReport(hr), err
		}},
		{"exports", func(profile string) (string, error) {
			xr, err := benchExports(stack, p, servers[1], profile)
			return exportsReport(xr), err
		}},
		{"mixed", func(string) (string, error) {
			mr, err := benchMixed(stack, creds.Management, servers[1])
			return mixedReport(mr), err
		}},
		{"events", func(profile string) (string, error) {
			er, err := benchEvents(stack, p, creds.Management, servers[1], d, profile)
			return eventsReport(er), err
		}},
		{"cors", func(string) (string, error) {
			cr, err := benchCORS(stack, p, d)
			return corsReport(cr), err
		}},
		{"outbox", func(string) (string, error) {
			or, err := benchOutbox(servers[1])
			return outboxReport(or), err
		}},
		{"noisy", func(string) (string, error) {
			nr, err := benchNoisy(stack, d)
			return noisyReport(nr), err
		}},
		{"ring", func(string) (string, error) {
			rr, err := benchRing(servers, b.secret, d)
			return ringReport(rr), err
		}},
		{"webhooks", func(profile string) (string, error) {
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return "", err
				}
				_ = pprof.StartCPUProfile(f)
				defer pprof.StopCPUProfile()
			}
			wr, err := benchWebhooks(stack, p, creds.Management, d)
			return webhookReport(wr), err
		}},
	}
}
