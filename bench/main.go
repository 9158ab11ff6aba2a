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
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	flog "fortio.org/log"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jackc/pgx/v5"
	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/identity"
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
	only := flag.String("only", "", "run only these benchmarks, comma-separated, in the usual order: loyalty, earning, products, vouchers, engine, exports, events, cors, webhooks, router")
	nginxBin := flag.String("nginx", "/usr/sbin/nginx", "nginx binary")
	flag.StringVar(&memProfile, "memprofile", "", "write the allocations of the router's first OAuth Bearer saturation round here (and those before it to FILE.base, for pprof -diff_base)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile here: of the router's first OAuth Bearer saturation round, the webhook run, or the point additions (with -only)")
	flag.Parse()
	if memProfile != "" {
		runtime.MemProfileRate = 64 << 10 // finer than the default 512 KiB
	}
	flog.SetLogLevel(flog.Warning)
	runtimex.TuneGC() // as `tally` itself does
	if err := run(*duration, *out, *nginxBin, *only); err != nil {
		log.Fatal(err)
	}
}

var cpuProfile, memProfile string

// rounds of the saturation phase per path.
const rounds = 3

// satRounds are the router section's saturation rounds: on two shared
// cores one path's round swings by ±15 % (nginx 4285–5331 rps in one
// run), so its ratios are medians of five rounds rather than three.
const satRounds = 5

type result struct {
	name                string
	p50, p99            float64 // ms at the fixed rate
	fixedQPS, fixedErrs float64
	satQPS              float64
	satP50, satP99      float64
	satErrs             int64
	satRounds           []float64 // sorted
	satByRound          []float64 // in the order the rounds ran
}

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
	var servers []*pglocal.Server
	defer func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}()
	for _, name := range []string{"tenancy", "api"} {
		s, err := pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(dir, name)})
		if err != nil {
			return err
		}
		servers = append(servers, s)
		if err := s.CreateDatabase(ctx, "tally"); err != nil {
			return err
		}
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
	// The bench's project is on a plan whose limits it never reaches, so
	// that every request goes through the limiter's leases; the router
	// section also measures a project without limits, which skips them.
	if err := db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		return tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: "bench", Features: []string{"webhooks"},
			RequestsPerMinute: 1_000_000_000, RequestsPerHour: 1_000_000_000})
	}); err != nil {
		return err
	}
	mgmt, err := stack.CreateManagementKey(ctx, "bench")
	if err != nil {
		return err
	}
	p, err := stack.CreateProject(ctx, "Bench", "api", "bench")
	if err != nil {
		return err
	}
	unlimited, err := stack.CreateProject(ctx, "Bench without limits", "api", "enterprise")
	if err != nil {
		return err
	}
	creds := devstack.Credentials{Management: mgmt}
	// The sections that write one report each; the router's, below, needs
	// nginx. profile is cpuProfile when the section runs alone.
	sections := []struct {
		name string
		run  func(profile string) (string, error)
	}{
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
		{"vouchers", func(string) (string, error) {
			vr, err := benchVouchers(stack, p, servers[1])
			return vouchersReport(vr), err
		}},
		{"engine", func(profile string) (string, error) {
			er, err := benchEngine(stack, p, servers[1], d, profile)
			return engineReport(er), err
		}},
		{"exports", func(profile string) (string, error) {
			xr, err := benchExports(stack, p, servers[1], profile)
			return exportsReport(xr), err
		}},
		{"events", func(string) (string, error) {
			er, err := benchEvents(stack, p, creds.Management, servers[1], d)
			return eventsReport(er), err
		}},
		{"cors", func(string) (string, error) {
			cr, err := benchCORS(stack, p, d)
			return corsReport(cr), err
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
	picked := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		picked[strings.TrimSpace(name)] = true
	}
	for _, sec := range sections {
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
	customerID, err := createCustomer(stack.RouterURL, p)
	if err != nil {
		return err
	}
	unlimitedID, err := createCustomer(stack.RouterURL, unlimited)
	if err != nil {
		return err
	}
	unlimitedPath := "/v1/customers/" + unlimitedID
	// An OAuth token of the bench's key (good for 15 minutes: the router
	// section takes about five).
	key, err := tenancy.GetAppKey(ctx, stack.Tenancy, p.AppID)
	if err != nil {
		return err
	}
	bearerToken, _, err := stack.Resolver.IssueToken(ctx, key, []string{"customers"}, tenancy.Binding{})
	if err != nil {
		return err
	}
	regionalURL := stack.RegionalURL("api")
	nginxURL, stopNginx, err := startNginx(nginxBin, dir, strings.TrimPrefix(regionalURL, "http://"))
	if err != nil {
		return err
	}
	defer stopNginx()

	path := "/v1/customers/" + customerID
	signer, _ := identity.NewSigner(secret)
	signed := func() string {
		// The bench stands in for the router, once per phase: its identity
		// outlives the router's seconds, for one GET of one path.
		return signer.Sign(identity.Identity{Audience: identity.AudienceRegional, ProjectID: p.ProjectID, Cluster: "api",
			Method: "GET", Path: path, Kind: identity.KindApp, KeyID: p.AppID,
			APIVersion: "v2018-08-01", RequestID: "v-bench", Expires: time.Now().Add(10 * time.Minute)})
	}
	targets := []struct {
		name, url string
		headers   func() []string
	}{
		{"direct to regional", regionalURL + path, func() []string { return []string{identity.Header + ": " + signed()} }},
		{"through the router", stack.RouterURL + path, func() []string {
			return []string{"Host: api.localhost", "X-App-Id: " + p.AppID, "X-App-Token: " + p.AppToken}
		}},
		{"through the router, no limits", stack.RouterURL + unlimitedPath, func() []string {
			return []string{"Host: api.localhost", "X-App-Id: " + unlimited.AppID, "X-App-Token: " + unlimited.AppToken}
		}},
		{"through the router, OAuth Bearer token", stack.RouterURL + path, func() []string {
			return []string{"Host: api.localhost", "Authorization: Bearer " + bearerToken}
		}},
		{"through nginx", nginxURL + path, func() []string { return []string{identity.Header + ": " + signed()} }},
	}
	results := make([]result, len(targets))
	for _, t := range targets {
		if _, err := load(t.url, t.headers(), 0, 2*time.Second, 32); err != nil { // warm up
			return err
		}
		if os.Getenv("BENCH_SERIAL") != "" {
			one, err := load(t.url, t.headers(), 200, d, 1)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  %s one at a time, 200 rps: p50 %.3f ms p99 %.3f ms\n", t.name, pct(one, 50), pct(one, 99))
		}
	}
	// The fixed rate in interleaved rounds too: a p99 is a handful of
	// requests, and one slow moment of the shared machine landing on one
	// path's only run made the router's p99 overhead swing from -1 to +2 ms
	// between consecutive runs. Each path's figures are its median rounds.
	fixedP50, fixedP99 := make([][]float64, len(targets)), make([][]float64, len(targets))
	for round := 0; round < rounds; round++ {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "bench: %s at 1,000 rps, round %d\n", t.name, round+1)
			fixed, err := load(t.url, t.headers(), 1000, d, 16)
			if err != nil {
				return err
			}
			fixedP50[i] = append(fixedP50[i], pct(fixed, 50))
			fixedP99[i] = append(fixedP99[i], pct(fixed, 99))
			r := &results[i]
			r.name, r.fixedErrs = t.name, r.fixedErrs+float64(errorsOf(fixed))
			if round == 0 || fixed.ActualQPS < r.fixedQPS {
				r.fixedQPS = fixed.ActualQPS // the lowest round's rate
			}
		}
	}
	for i := range targets {
		results[i].p50, results[i].p99 = median(fixedP50[i]), median(fixedP99[i])
	}
	// Saturation in interleaved rounds, so that a slow moment of the machine
	// does not land on one path only; each path's figure is its median round.
	sats := make([][]*fhttp.HTTPRunnerResults, len(targets))
	for round := 0; round < satRounds; round++ {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "bench: %s at saturation, round %d\n", t.name, round+1)
			if cpuProfile != "" && round == 0 && strings.Contains(t.name, "Bearer") {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				_ = pprof.StartCPUProfile(f)
			}
			heap := memProfile != "" && round == 0 && strings.Contains(t.name, "Bearer")
			if heap {
				if err := writeHeap(memProfile + ".base"); err != nil {
					return err
				}
			}
			sat, err := load(t.url, t.headers(), 0, d, 32)
			pprof.StopCPUProfile()
			if heap {
				if err := writeHeap(memProfile); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			sats[i] = append(sats[i], sat)
		}
	}
	for i := range targets {
		for _, s := range sats[i] {
			results[i].satByRound = append(results[i].satByRound, s.ActualQPS)
		}
		sort.Slice(sats[i], func(a, b int) bool { return sats[i][a].ActualQPS < sats[i][b].ActualQPS })
		sat := sats[i][len(sats[i])/2]
		r := &results[i]
		r.satQPS, r.satP50, r.satP99, r.satErrs = sat.ActualQPS, pct(sat, 50), pct(sat, 99), errorsOf(sat)
		for _, s := range sats[i] {
			r.satRounds = append(r.satRounds, s.ActualQPS)
		}
		fmt.Fprintf(os.Stderr, "%s: 1000 rps p50 %.3f ms p99 %.3f ms; saturation %.0f rps (rounds %.0f)\n",
			r.name, r.p50, r.p99, r.satQPS, r.satRounds)
	}
	return writeReport(outPath, d, results)
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func load(url string, headers []string, qps float64, d time.Duration, threads int) (*fhttp.HTTPRunnerResults, error) {
	return loadAs("GET", http.StatusOK, url, headers, qps, d, threads)
}

// loadAs is load for requests of method whose success is status.
func loadAs(method string, status int, url string, headers []string, qps float64, d time.Duration, threads int) (*fhttp.HTTPRunnerResults, error) {
	// Uniform spreads the threads' requests evenly over time: an open-loop
	// fixed rate rather than every thread firing in the same instant.
	o := fhttp.HTTPRunnerOptions{RunnerOptions: periodic.RunnerOptions{QPS: qps, Duration: d, NumThreads: threads,
		Percentiles: []float64{50, 99}, Out: io.Discard, Uniform: qps > 0}}
	if qps == 0 {
		o.QPS = -1 // as fast as possible
	}
	o.URL, o.MethodOverride = url, method
	for _, h := range headers {
		if err := o.AddAndValidateExtraHeader(h); err != nil {
			return nil, err
		}
	}
	res, err := fhttp.RunHTTPTest(&o)
	if err != nil {
		return nil, err
	}
	if res.RetCodes[status] == 0 {
		return nil, fmt.Errorf("%s %s: no successful request: %v", method, url, res.RetCodes)
	}
	return res, nil
}

func pct(r *fhttp.HTTPRunnerResults, p float64) float64 {
	for _, x := range r.DurationHistogram.Percentiles {
		if x.Percentile == p {
			return x.Value * 1000
		}
	}
	return -1
}

func errorsOf(r *fhttp.HTTPRunnerResults) int64 {
	var n int64
	for code, c := range r.RetCodes {
		if code != http.StatusOK {
			n += c
		}
	}
	return n
}

func createCustomer(routerURL string, p devstack.ProjectCredentials) (string, error) {
	req, _ := http.NewRequest("POST", routerURL+"/v1/customers", strings.NewReader(`{"source_id":"bench","name":"Bench Customer","email":"bench@example.com","metadata":{"plan":"gold"}}`))
	req.Host = "api.localhost"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-App-Id", p.AppID)
	req.Header.Set("X-App-Token", p.AppToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return "", fmt.Errorf("create customer: %d %s", res.StatusCode, b)
	}
	i := strings.Index(string(b), `"id":"`)
	if i < 0 {
		return "", errors.New("create customer: no id")
	}
	id := string(b[i+6:])
	return id[:strings.IndexByte(id, '"')], nil
}

func startNginx(bin, dir, upstream string) (string, func(), error) {
	if _, err := os.Stat(bin); err != nil {
		return "", nil, fmt.Errorf("nginx not found at %s (bench/run.sh installs it)", bin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	prefix := filepath.Join(dir, "nginx")
	_ = os.MkdirAll(filepath.Join(prefix, "logs"), 0o755)
	conf := fmt.Sprintf(`worker_processes auto;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  upstream regional { server %[2]s; keepalive 256; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://regional;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }
  }
}
`, prefix, upstream, addr)
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-p", prefix, "-c", confPath, "-g", "daemon off;")
	// Not our stderr: a worker that outlived its master would hold the pipe open.
	logFile, err := os.Create(filepath.Join(prefix, "logs", "stderr.log"))
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop := func() {
		// SIGQUIT: graceful shutdown, the master takes its workers with it.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	}
	return "http://" + addr, stop, nil
}

func writeReport(path string, d time.Duration, rs []result) error {
	direct, router, unlimited, bearer, nginx := rs[0], rs[1], rs[2], rs[3], rs[4]
	addP50, addP99 := router.p50-direct.p50, router.p99-direct.p99
	ratio := router.satQPS / nginx.satQPS
	limitsCost := router.satQPS / unlimited.satQPS
	var b strings.Builder
	fmt.Fprintf(&b, "## Router overhead: `GET /v1/customers/{id}`\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s, %d cores (GOMAXPROCS %d), %s, %s per phase. ",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), d)
	fmt.Fprintf(&b, "One fortio load generator, the platform (router, regional, management), nginx and PostgreSQL "+
		"(default settings) share the machine. Tracing is on: every span is batched to an exporter. The fixed rate is open-loop (fortio `uniform`: requests evenly spread, not in bursts). GC target as `tally` sets it (GOGC 400 unless GOGC is set).\n\n")
	fmt.Fprintf(&b, "| path | p50 at 1,000 rps (median of %d rounds) | p99 at 1,000 rps (median of %d rounds) | achieved rps | saturation rps (median of %d rounds) | rounds | p50 / p99 at saturation | non-200 |\n", rounds, rounds, satRounds)
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %.3f ms | %.3f ms | %.0f | %.0f | %.0f | %.2f / %.2f ms | %d |\n", r.name, r.p50, r.p99, r.fixedQPS,
			r.satQPS, r.satRounds, r.satP50, r.satP99, int64(r.fixedErrs)+r.satErrs)
	}
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| router adds at p50 (1,000 rps) | ≤ 0.5 ms | %.3f ms | %s |\n", addP50, verdict(addP50 <= 0.5))
	fmt.Fprintf(&b, "| router adds at p99 (1,000 rps) | ≤ 2 ms | %.3f ms | %s |\n", addP99, verdict(addP99 <= 2))
	fmt.Fprintf(&b, "| router ÷ nginx throughput at saturation | ≥ 0.8 | %.2f | %s |\n", ratio, verdict(ratio >= 0.8))
	fmt.Fprintf(&b, "| router ÷ nginx throughput at saturation, limits on, with a Bearer token (issue 15) | ≥ 0.9 | %.2f | %s |\n",
		bearer.satQPS/nginx.satQPS, verdict(bearer.satQPS/nginx.satQPS >= 0.9))
	fmt.Fprintf(&b, "| the same, round by round: each Bearer round ÷ the nginx round of the same pass (a pass runs every path once, minutes apart at most) | (reported) | %s | |\n",
		paired(bearer.satByRound, nginx.satByRound))
	fmt.Fprintf(&b, "| a Bearer token's p50 / p99 added over the key pair's (1,000 rps) | (reported) | %+.3f / %+.3f ms | |\n",
		bearer.p50-router.p50, bearer.p99-router.p99)
	fmt.Fprintf(&b, "| router throughput, rate limits on ÷ off (a project with limits it never reaches, and one without) | ≥ 0.95 | %.2f | %s |\n",
		limitsCost, verdict(limitsCost >= 0.95))
	return replaceSection(path, "router", b.String())
}

// paired is the ratios of a's rounds to b's, pass by pass, and their median.
func paired(a, b []float64) string {
	var rs []float64
	var parts []string
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
			parts = append(parts, fmt.Sprintf("%.2f", a[i]/b[i]))
		}
	}
	if len(rs) == 0 {
		return "-"
	}
	return fmt.Sprintf("median %.2f (%s)", median(rs), strings.Join(parts, ", "))
}

// replaceSection rewrites the part of the report between this benchmark's
// markers, so that each benchmark owns its section.
func replaceSection(path, name, body string) error {
	begin, end := "<!-- bench:"+name+" -->", "<!-- /bench:"+name+" -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	if s == "" {
		s = "# Benchmarks\n\nFigures written by `make bench`; each section is replaced when its benchmark runs.\n"
	}
	section := begin + "\n" + body + end
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// writeHeap writes the allocations made so far (a heap profile's
// alloc_space and alloc_objects) to path.
func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC() // the profile is as of the last collection
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
