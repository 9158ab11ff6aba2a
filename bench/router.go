package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// rounds of the saturation phase per path.
const rounds = 3

// satPasses are the router section's saturation passes, each running
// every path once for half a phase. On two shared cores one path's round
// swings by ±15 % (nginx 4,408–5,608 rps in one run) and the machine
// drifts over minutes, so the two ratios with targets are measured as
// A/B pairs: the paths compared run back to back in one pass, their order
// within the pair alternating pass by pass (ABBA) and the pairs' place in
// the pass rotating, and each ratio is the median of its paired ratios,
// with a distribution-free interval for that median. Eighteen passes: a
// multiple of six, so that each pair runs in each of the three places
// with each of its paths first equally often; and with ten, a run's
// median swung by ±0.02 around the pooled one (0.89–0.94 for one ratio
// over seven runs), which put a ratio within 0.03 of its target on
// either side of it from run to run. The 89 % interval of ten order
// statistics (x(3), x(8)) becomes 90 % at (x(6), x(13)) of eighteen.
const satPasses = 18

// passOrder is the order the router section's paths run in pass p:
// direct (0) alone, the limits pair (router 1, no limits 2) and the
// Bearer pair (Bearer 3, nginx 4) each back to back.
func passOrder(p int) []int {
	groups := [][]int{{0}, {1, 2}, {3, 4}}
	var order []int
	for g := range groups {
		pair := slices.Clone(groups[(g+p)%len(groups)])
		if p%2 == 1 {
			slices.Reverse(pair)
		}
		order = append(order, pair...)
	}
	return order
}

type result struct {
	name                string
	p50, p99            float64 // ms at the fixed rate
	fixedQPS, fixedErrs float64
	satQPS              float64
	satP50, satP99      float64
	satErrs             int64
	satRounds           []float64 // sorted
	satByPass           []float64 // pass by pass
}

// benchRouter is the router section: the same regional read straight to
// the regional instance, through the router (with and without limits,
// with a key pair and with a Bearer token) and through nginx, at a fixed
// rate and at saturation.
func benchRouter(stack *devstack.Stack, p, unlimited devstack.ProjectCredentials, secret []byte, dir, nginxBin string,
	d time.Duration, outPath string) error {
	ctx := context.Background()
	customerID, err := createCustomer(stack.RouterURL, p)
	if err != nil {
		return err
	}
	unlimitedID, err := createCustomer(stack.RouterURL, unlimited)
	if err != nil {
		return err
	}
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
	targets := routerTargets(stack, p, unlimited, secret, regionalURL, nginxURL, customerID, unlimitedID, bearerToken)
	if err := warmUp(targets, d); err != nil {
		return err
	}
	results := make([]result, len(targets))
	if err := routerFixed(targets, results, d); err != nil {
		return err
	}
	if err := routerSaturation(targets, results, d); err != nil {
		return err
	}
	return writeReport(outPath, d, results)
}

// routerTarget is one path to the same regional request: its name, URL
// and headers.
type routerTarget struct {
	name, url string
	headers   func() []string
}

// routerTargets are the paths measured: straight to the regional instance
// (signing its identity as the router would), through the router with the
// key pair, without limits, and with an OAuth Bearer token, and through
// nginx.
func routerTargets(stack *devstack.Stack, p, unlimited devstack.ProjectCredentials, secret []byte, regionalURL, nginxURL,
	customerID, unlimitedID, bearerToken string) []routerTarget {
	unlimitedPath := "/v1/customers/" + unlimitedID
	path := "/v1/customers/" + customerID
	signer, _ := identity.NewSigner(secret)
	signed := func() string {
		// The bench stands in for the router, once per phase: its identity
		// outlives the router's seconds, for one GET of one path.
		return signer.Sign(identity.Identity{Audience: identity.AudienceRegional, ProjectID: p.ProjectID, Cluster: "api",
			Method: "GET", Path: path, Kind: identity.KindApp, KeyID: p.AppID,
			APIVersion: "v2018-08-01", RequestID: "v-bench", Expires: time.Now().Add(10 * time.Minute)})
	}
	return []routerTarget{
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
}

// warmUp runs every target for two seconds before the measures (and with
// BENCH_SERIAL, one request at a time at 200 rps).
func warmUp(targets []routerTarget, d time.Duration) error {
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
	return nil
}

// routerFixed measures every target at 1,000 rps, in interleaved rounds.
func routerFixed(targets []routerTarget, results []result, d time.Duration) error {
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
	return nil
}

// routerSaturation measures every target at saturation, in passes.
func routerSaturation(targets []routerTarget, results []result, d time.Duration) error {
	// Saturation in passes (see satPasses); each path's figure is its
	// median round.
	sats := make([][]*fhttp.HTTPRunnerResults, len(targets))
	profiled := false
	for pass := 0; pass < satPasses; pass++ {
		for _, i := range passOrder(pass) {
			t := targets[i]
			fmt.Fprintf(os.Stderr, "bench: %s at saturation, pass %d\n", t.name, pass+1)
			profile := !profiled && strings.Contains(t.name, "Bearer")
			profiled = profiled || profile
			if profile && cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				_ = pprof.StartCPUProfile(f)
			}
			if profile && memProfile != "" {
				if err := writeHeap(memProfile + ".base"); err != nil {
					return err
				}
			}
			sat, err := load(t.url, t.headers(), 0, d/2, 32)
			pprof.StopCPUProfile()
			if profile && memProfile != "" {
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
			results[i].satByPass = append(results[i].satByPass, s.ActualQPS)
		}
		sort.Slice(sats[i], func(a, b int) bool { return sats[i][a].ActualQPS < sats[i][b].ActualQPS })
		sat := sats[i][len(sats[i])/2]
		r := &results[i]
		r.satQPS, r.satP50, r.satP99, r.satErrs = sat.ActualQPS, pct(sat, 50), pct(sat, 99), 0
		for _, s := range sats[i] {
			r.satRounds = append(r.satRounds, s.ActualQPS)
			r.satErrs += errorsOf(s)
		}
		fmt.Fprintf(os.Stderr, "%s: 1000 rps p50 %.3f ms p99 %.3f ms; saturation %.0f rps (rounds %.0f)\n",
			r.name, r.p50, r.p99, r.satQPS, r.satRounds)
	}
	return nil
}

func createCustomer(routerURL string, p devstack.ProjectCredentials) (string, error) {
	c := client{base: routerURL, p: p, hc: http.DefaultClient}
	m, err := c.must("POST", "/v1/customers", map[string]any{"source_id": "bench", "name": "Bench Customer", "email": "bench@example.com",
		"metadata": map[string]any{"plan": "gold"}})
	if err != nil {
		return "", err
	}
	id, _ := m["id"].(string)
	if id == "" {
		return "", errors.New("create customer: no id")
	}
	return id, nil
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
	vsNginx := pairedRatios(bearer.satByPass, nginx.satByPass)
	limits := pairedRatios(router.satByPass, unlimited.satByPass)
	var b strings.Builder
	fmt.Fprintf(&b, "## Router overhead: `GET /v1/customers/{id}`\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s, %d cores (GOMAXPROCS %d), %s, %s per fixed-rate phase. ",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), d)
	fmt.Fprintf(&b, "One fortio load generator, the platform (router, regional, management), nginx and PostgreSQL "+
		"(default settings) share the machine. Tracing is on: every span is batched to an exporter. The fixed rate is open-loop (fortio `uniform`: requests evenly spread, not in bursts). GC target as `tally` sets it (GOGC 400 unless GOGC is set).\n\n")
	fmt.Fprintf(&b, "Saturation runs in %d passes of %s per path. The two ratios with targets are A/B pairs: the paths compared "+
		"run back to back in each pass, their order within the pair alternating pass by pass and the pair's place in the pass rotating; "+
		"each ratio is the median of its %d paired ratios, with the interval its order statistics give that median (coverage shown).\n\n",
		satPasses, d/2, satPasses)
	fmt.Fprintf(&b, "| path | p50 at 1,000 rps (median of %d rounds) | p99 at 1,000 rps (median of %d rounds) | achieved rps | saturation rps (median of %d rounds) | rounds, pass by pass | p50 / p99 at saturation (median round) | non-200 |\n", rounds, rounds, satPasses)
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %.3f ms | %.3f ms | %.0f | %.0f | %.0f | %.2f / %.2f ms | %d |\n", r.name, r.p50, r.p99, r.fixedQPS,
			r.satQPS, r.satByPass, r.satP50, r.satP99, int64(r.fixedErrs)+r.satErrs)
	}
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| router adds at p50 (1,000 rps) | ≤ 0.5 ms | %.3f ms | %s |\n", addP50, verdict(addP50 <= 0.5))
	fmt.Fprintf(&b, "| router adds at p99 (1,000 rps) | ≤ 2 ms | %.3f ms | %s |\n", addP99, verdict(addP99 <= 2))
	fmt.Fprintf(&b, "| router ÷ nginx throughput at saturation (ratio of median rounds) | ≥ 0.8 | %.2f | %s |\n", ratio, verdict(ratio >= 0.8))
	fmt.Fprintf(&b, "| router ÷ nginx throughput at saturation, limits on, with a Bearer token (issue 15): median of the paired ratios | ≥ 0.9 | %s | %s |\n",
		vsNginx, verdict(vsNginx.median >= 0.9))
	fmt.Fprintf(&b, "| the same as a ratio of the two paths' median rounds | (reported) | %.2f | |\n", bearer.satQPS/nginx.satQPS)
	fmt.Fprintf(&b, "| a Bearer token's p50 / p99 added over the key pair's (1,000 rps) | (reported) | %+.3f / %+.3f ms | |\n",
		bearer.p50-router.p50, bearer.p99-router.p99)
	fmt.Fprintf(&b, "| router throughput, rate limits on ÷ off (a project with limits it never reaches, and one without): median of the paired ratios | ≥ 0.95 | %s | %s |\n",
		limits, verdict(limits.median >= 0.95))
	fmt.Fprintf(&b, "| the same as a ratio of the two paths' median rounds | (reported) | %.2f | |\n", router.satQPS/unlimited.satQPS)
	return replaceSection(path, "router", b.String())
}

// ratios is a paired comparison: a's rounds over b's, pass by pass.
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
