package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/internal/pglocal"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/tenancy"
)

// ringPasses are the ring section's passes: in each, the limits-on and
// limits-off projects run back to back (their order alternating pass by
// pass), at saturation and then at 1,000 requests a second.
const ringPasses = 8

// ringRouters is how many router replicas form the ring, as the manifests
// run them.
const ringRouters = 3

type ringResult struct {
	satOn, satOff   []float64 // requests a second at saturation, pass by pass
	p99On, p99Off   []float64 // ms at 1,000 a second, pass by pass
	p50On, p50Off   []float64
	coldOn, coldOff []float64 // p99 at 1,000 a second over the first warm seconds, ms
	errsOn, errsOff int64
	phase           time.Duration // at saturation
	fixed           time.Duration // at 1,000 a second: a p99 wants samples
	warm            time.Duration // at 1,000 a second before it, not in the figure
}

// ringCall is one load thread of client-side reads: each request to the
// next of the replicas, from the next of clientAddresses addresses
// (X-Forwarded-For, believed from loopback as from a balancer).
type ringCall struct {
	routers []string
	p       devstack.ProjectCredentials
	origin  string
	hc      *http.Client
	next    *atomic.Int64
	errs    *atomic.Int64
}

func (k *ringCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	n := int(k.next.Add(1))
	req, _ := http.NewRequest("GET", k.routers[n%len(k.routers)]+"/client/v1/promotions/tiers", nil)
	req.Host = "api.localhost"
	a := n % clientAddresses
	req.Header = http.Header{
		"X-Client-Application-Id": {k.p.ClientAppID}, "X-Client-Token": {k.p.ClientToken}, "Origin": {k.origin},
		"X-Forwarded-For": {fmt.Sprintf("198.18.%d.%d", a/250, 1+a%250)},
	}
	res, err := k.hc.Do(req)
	if err != nil {
		k.errs.Add(1)
		return false, ""
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		k.errs.Add(1)
		return false, ""
	}
	return true, ""
}

// benchRing is issue 35's figures: three router replicas as one ring
// (internal/peerlimit), client-side reads from clientAddresses addresses
// sent round-robin over the three. One project's per-address limit is on,
// set high enough that it refuses nothing, so every request is checked
// and does the same work after; the other project's limit is off (a limit
// of 0 requests), which skips the check. Throughput at saturation and p99
// at 1,000 a second, on beside off, pass by pass.
func benchRing(servers []*pglocal.Server, secret []byte, d time.Duration) (ringResult, error) {
	r := ringResult{phase: d / 2, fixed: d, warm: 3 * time.Second}
	rs, err := startRing(servers, secret)
	if err != nil {
		return r, err
	}
	defer rs.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	var next atomic.Int64
	errsOn, errsOff := new(atomic.Int64), new(atomic.Int64)
	runners := func(p devstack.ProjectCredentials, errs *atomic.Int64, n int) []periodic.Runnable {
		out := make([]periodic.Runnable, n)
		for i := range out {
			out[i] = &ringCall{routers: rs.stack.RouterURLs, p: p, origin: ringOrigin, hc: hc, next: &next, errs: errs}
		}
		return out
	}
	// Every replica sees the projects' settings with its next poll.
	for _, p := range []devstack.ProjectCredentials{rs.on, rs.strict, rs.off} {
		if err := ringReady(&ringCall{routers: rs.stack.RouterURLs, p: p, origin: ringOrigin, hc: hc, next: &next, errs: new(atomic.Int64)}); err != nil {
			return r, err
		}
	}
	onSat, offSat := runners(rs.on, errsOn, 32), runners(rs.off, errsOff, 32)
	onFixed, offFixed := runners(rs.strict, errsOn, 16), runners(rs.off, errsOff, 16)
	ringRun(onSat, 0, 2*time.Second) // warm up: connections, caches, the ring's counters
	ringRun(offSat, 0, 2*time.Second)
	errsOn.Store(0)
	errsOff.Store(0)
	for pass := range ringPasses {
		order := []bool{true, false}
		if pass%2 == 1 {
			slices.Reverse(order)
		}
		for _, limited := range order {
			sat, fixed := offSat, offFixed
			if limited {
				sat, fixed = onSat, onFixed
			}
			s := ringRun(sat, 0, r.phase)
			// The first seconds at 1,000 a second, recorded apart: the
			// figure is the steady state at that rate.
			_, _, cold := percentiles(ringRun(fixed, 1000, r.warm))
			f := ringRun(fixed, 1000, r.fixed)
			p50, _, p99 := percentiles(f)
			r.add(limited, s.ActualQPS, p50, p99, cold)
			fmt.Fprintf(os.Stderr, "bench: ring: pass %d, limits %v: saturation %.0f rps; at 1000 rps p50 %.3f p99 %.3f ms (first %v: p99 %.3f)\n",
				pass+1, map[bool]string{true: "on", false: "off"}[limited], s.ActualQPS, p50, p99, r.warm, cold)
		}
	}
	r.errsOn, r.errsOff = errsOn.Load(), errsOff.Load()
	return r, nil
}

func (r *ringResult) add(limited bool, sat, p50, p99, cold float64) {
	if limited {
		r.satOn, r.p50On, r.p99On, r.coldOn = append(r.satOn, sat), append(r.p50On, p50), append(r.p99On, p99), append(r.coldOn, cold)
		return
	}
	r.satOff, r.p50Off, r.p99Off, r.coldOff = append(r.satOff, sat), append(r.p50Off, p50), append(r.p99Off, p99), append(r.coldOff, cold)
}

// ringRun runs rs at qps (0: as fast as they go) for d.
func ringRun(rs []periodic.Runnable, qps float64, d time.Duration) periodic.RunnerResults {
	ro := periodic.RunnerOptions{QPS: qps, Duration: d, NumThreads: len(rs), Percentiles: []float64{50, 99},
		Out: io.Discard, Uniform: qps > 0}
	if qps == 0 {
		ro.QPS = -1
	}
	pr := periodic.NewPeriodicRunner(&ro)
	copy(pr.Options().Runners, rs)
	return pr.Run()
}

// ringReady waits until every replica answers the probe's project.
func ringReady(probe *ringCall) error {
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ok := true
		for range ringRouters {
			if good, _ := probe.Run(context.Background(), 0); !good {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ring: client-side reads of %s refused after 15 s", probe.p.ProjectID)
		}
	}
}

const ringOrigin = "https://shop.example"

// ringStack is the section's platform and its three projects.
type ringStack struct {
	stack           *devstack.Stack
	log             *os.File
	on, strict, off devstack.ProjectCredentials
}

func (rs *ringStack) Close() {
	rs.stack.Close()
	rs.log.Close()
}

func startRing(servers []*pglocal.Server, secret []byte) (*ringStack, error) {
	ctx := context.Background()
	urls := make([]string, len(servers))
	for i, s := range servers {
		if err := s.CreateDatabase(ctx, "tally_ring"); err != nil {
			return nil, err
		}
		urls[i] = s.URL("tally_ring")
	}
	logFile, err := os.Create(filepath.Join(os.TempDir(), "tally-bench-ring.log"))
	if err != nil {
		return nil, err
	}
	stack, err := devstack.Start(ctx, devstack.Config{
		TenancyURL:     urls[0],
		Regions:        []devstack.Region{{Cluster: "api", Region: "europe", DatabaseURL: urls[1]}},
		IdentitySecret: secret, Log: telemetry.NewLogger(logFile, 8),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		Routers:        ringRouters,
		StartRing:      peerlimit.StartMember,
	})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	rs := &ringStack{stack: stack, log: logFile}
	fail := func(err error) (*ringStack, error) { rs.Close(); return nil, err }
	if err := db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		return tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: "bench", RequestsPerMinute: 1_000_000_000,
			RequestsPerHour: 1_000_000_000, ClusterShare: 1})
	}); err != nil {
		return fail(err)
	}
	project := func(name string, lim tenancy.IPLimit) (devstack.ProjectCredentials, error) {
		p, err := stack.CreateProject(ctx, name, "api", "bench")
		if err != nil {
			return p, err
		}
		return p, db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
			pr, err := tenancy.GetProject(ctx, tx, p.ProjectID)
			if err != nil {
				return err
			}
			pr.Settings.ClientTrustedDomains = []string{ringOrigin}
			pr.Settings.ClientIPLimit = &lim
			return tenancy.UpdateProject(ctx, tx, &pr)
		})
	}
	if rs.on, err = project("Ring, limits on", tenancy.IPLimit{Requests: 1_000_000, Seconds: 1}); err != nil {
		return fail(err)
	}
	// The interface's own limit for the latency: 1,000 a second from
	// 1,000 addresses is one a second each, within its refill.
	if rs.strict, err = project("Ring, 5 per 5 s", tenancy.DefaultClientIPLimit); err != nil {
		return fail(err)
	}
	if rs.off, err = project("Ring, limits off", tenancy.IPLimit{}); err != nil {
		return fail(err)
	}
	return rs, nil
}

// ringReport is the section's figures.
func ringReport(r ringResult) string {
	var b strings.Builder
	sat := pairedRatios(r.satOn, r.satOff)
	var added []float64
	for i := range min(len(r.p99On), len(r.p99Off)) {
		added = append(added, r.p99On[i]-r.p99Off[i])
	}
	slices.Sort(added)
	addedMed := 0.0
	if n := len(added); n > 0 {
		addedMed = (added[(n-1)/2] + added[n/2]) / 2
	}
	fmt.Fprintf(&b, "## Per-address limits on the ring of routers (issue 35)\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: a platform of its own beside the main one, on the same PostgreSQL servers, "+
		"with %d router replicas as one ring (`internal/peerlimit`, gubernator, on loopback). Client-side reads "+
		"(`GET /client/v1/promotions/tiers`, a client key from a trusted origin) from %d addresses (`X-Forwarded-For` from a "+
		"trusted proxy), each request to the next replica in turn. At saturation, one project's per-address limit is on, set "+
		"high enough (1,000,000 a second) that it refuses nothing, so that both projects do the same work after the check: "+
		"each replica takes its tokens from an address's owner a lease of 64 at a time (`router/peerlimit.go`). At 1,000 a "+
		"second, the limited project has the interface's 5 per 5 s, one request a second from each address, within its refill: "+
		"every request asks its address's owner (two in three on another replica, by gRPC). The other project's limit "+
		"is off (0 requests), which skips the check. %d passes, each running the limited and the unlimited project back to "+
		"back, their order alternating: %v at saturation (32 threads), then %v at 1,000 requests a second (16 threads, "+
		"evenly spread), not measured, then %v measured at the same rate "+
		"(the steady state). The load generator shares the two cores.\n\n",
		time.Now().UTC().Format("2006-01-02"), ringRouters, clientAddresses, ringPasses, r.phase, r.warm, r.fixed)
	fmt.Fprintf(&b, "| figure | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| throughput with limits on ÷ off, median of the paired ratios | ≥ 0.95 | %s | %s |\n", sat, verdict(sat.median >= 0.95))
	fmt.Fprintf(&b, "| p99 added by the limit at 1,000 a second (5 per 5 s, every request checked by its owner): on − off, median of the paired differences | ≤ 0.3 ms | %.3f ms (pass by pass %s) | %s |\n",
		addedMed, msList(r.p99On, r.p99Off), verdict(addedMed <= 0.3))
	fmt.Fprintf(&b, "\n- Saturation, requests a second, limits on: %s; off: %s.\n", rpsList(r.satOn), rpsList(r.satOff))
	fmt.Fprintf(&b, "- At 1,000 a second, p50 on: %s ms; off: %s ms. p99 on: %s ms; off: %s ms.\n",
		fList(r.p50On), fList(r.p50Off), fList(r.p99On), fList(r.p99Off))
	fmt.Fprintf(&b, "- Over the first %v at 1,000 a second, not in the figure, p99 on: %s ms; off: %s ms.\n",
		r.warm, fList(r.coldOn), fList(r.coldOff))
	fmt.Fprintf(&b, "- Requests not answered 200: limits on %d, off %d.\n\n", r.errsOn, r.errsOff)
	return b.String()
}

func msList(a, b []float64) string {
	var parts []string
	for i := range min(len(a), len(b)) {
		parts = append(parts, fmt.Sprintf("%+.3f", a[i]-b[i]))
	}
	return strings.Join(parts, ", ")
}

func rpsList(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, ", ")
}

func fList(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(parts, ", ")
}
