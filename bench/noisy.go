package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/devstack/noisy"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/tenancy"
)

// noisyPairs is how many idle and busy phases alternate: what else the
// machine does meanwhile (a checkpoint, autovacuum) weighs on both alike.
const noisyPairs = 8

type noisyResult struct {
	idleP50, idleP99, busyP50, busyP99 []float64 // B's, ms, phase by phase
	idleQPS, busyQPS                   float64   // B's achieved rate, mean of phases
	bErrs                              int64
	aDone, aOver, aOther               int64 // A's requests while busy: answered 200, 503 over its share, else
	aSecs                              float64
	share                              int64
	phase                              time.Duration
}

// quietCall is one of B's threads: a read of a voucher, a balance change
// of its card, or a new customer, by thread.
type quietCall struct {
	c    client
	kind int
	card string
	n    atomic.Int64
}

func (q *quietCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	var status int
	var err error
	switch q.kind % 3 {
	case 0:
		status, _, err = q.c.do("GET", "/v1/vouchers/CALM", nil)
	case 1:
		status, _, err = q.c.do("POST", "/v1/loyalties/members/"+q.card+"/balance", map[string]any{"points": 1})
	default:
		status, _, err = q.c.do("POST", "/v1/customers", map[string]any{"source_id": fmt.Sprintf("calm-%d-%d", q.kind, q.n.Add(1))})
	}
	return err == nil && status == 200, ""
}

// benchNoisy is issue 32's noisy neighbour: project A's 50 clients write
// as fast as they are answered on one voucher, one gift card and one
// loyalty card (redemptions of one code, points added to one card, stacked
// redemptions whose two children are rolled back at once), while project B
// reads and writes at 200 a second on the same cluster. Both are on a plan
// with the default share of the cluster. B's p99 with A busy over its p99
// with A idle, phase by phase.
func benchNoisy(stack *devstack.Stack, d time.Duration) (noisyResult, error) {
	ctx := context.Background()
	var r noisyResult
	if err := db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		return tenancy.PutPlan(ctx, tx, tenancy.Plan{Name: "shared", Features: []string{"webhooks"},
			RequestsPerMinute: 1_000_000_000, RequestsPerHour: 1_000_000_000})
	}); err != nil {
		return r, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}
	project := func(name string) (client, error) {
		p, err := stack.CreateProject(ctx, name, "api", "shared")
		return client{base: stack.RouterURL, p: p, hc: hc}, err
	}
	a, err := project("Noisy")
	if err != nil {
		return r, err
	}
	b, err := project("Quiet")
	if err != nil {
		return r, err
	}
	hot, err := noisy.Setup(a.do)
	if err != nil {
		return r, err
	}
	if _, err := b.must("POST", "/v1/vouchers/CALM", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 10}}); err != nil {
		return r, err
	}
	camp, err := b.must("POST", "/v1/loyalties", map[string]any{"name": "Calm cards"})
	if err != nil {
		return r, err
	}
	m, err := b.must("POST", "/v1/loyalties/"+camp["id"].(string)+"/members", map[string]any{"customer": map[string]any{"source_id": "calm"}})
	if err != nil {
		return r, err
	}
	calm := m["code"].(string)

	// A: 50 clients in a process of their own (their JSON and garbage are
	// not the platform's, as a tenant's clients are not), running while
	// busy: SIGSTOP and SIGCONT between phases would freeze requests in
	// flight, so the process is started and stopped for each busy phase.
	hammer := func() (*exec.Cmd, *bytes.Buffer, error) {
		cmd := exec.Command(os.Args[0], "-hammer", strings.Join([]string{stack.RouterURL, a.p.AppID, a.p.AppToken, hot}, ","))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		return cmd, &out, cmd.Start()
	}
	var runners []periodic.Runnable
	for k := range 6 {
		runners = append(runners, &quietCall{c: b, kind: k, card: calm})
	}
	phase := func() periodic.RunnerResults {
		ro := periodic.RunnerOptions{QPS: 200, Duration: d, NumThreads: len(runners), Percentiles: []float64{50, 95, 99},
			Out: io.Discard, Uniform: true}
		pr := periodic.NewPeriodicRunner(&ro)
		copy(pr.Options().Runners, runners)
		return pr.Run()
	}
	at200(runners, time.Second) // warm-up
	var aTime time.Duration
	for range noisyPairs {
		for _, loaded := range []bool{false, true} {
			var cmd *exec.Cmd
			var out *bytes.Buffer
			if loaded {
				if cmd, out, err = hammer(); err != nil {
					return r, err
				}
				time.Sleep(time.Second) // A's pile-up forms
			} else {
				time.Sleep(500 * time.Millisecond)
			}
			t0 := time.Now()
			rr := phase()
			p50, _, p99 := percentiles(rr)
			r.bErrs += rr.ErrorsDurationHistogram.Count
			if loaded {
				aTime += time.Since(t0)
				_ = cmd.Process.Signal(os.Interrupt)
				_ = cmd.Wait()
				var done, over, other int64
				fmt.Sscan(out.String(), &done, &over, &other)
				r.aDone, r.aOver, r.aOther = r.aDone+done, r.aOver+over, r.aOther+other
				r.busyP50, r.busyP99 = append(r.busyP50, p50), append(r.busyP99, p99)
				r.busyQPS += rr.ActualQPS / noisyPairs
			} else {
				r.idleP50, r.idleP99 = append(r.idleP50, p50), append(r.idleP99, p99)
				r.idleQPS += rr.ActualQPS / noisyPairs
			}
		}
	}
	r.aSecs, r.phase = aTime.Seconds(), d
	r.share = db.Share(regional.DefaultMaxConns(), tenancy.DefaultClusterShare)
	return r, nil
}

func noisyReport(r noisyResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Noisy neighbour (issue 32)\n\n")
	fmt.Fprintf(&b, "Project A's 50 clients write as fast as they are answered on one voucher, one gift card and one loyalty card "+
		"(redemptions of one code, points added to one card, stacked redemptions whose two children are rolled back at once); "+
		"project B reads a voucher, adds points to its card and creates customers at 200 a second (fortio, uniform) on the same "+
		"cluster. Both are on a plan with the default share of the cluster: a quarter of the regional instance's connections "+
		"(%d requests at once) and, while the CPU is busier than the instance's target (0.6), a part of its CPU by share "+
		"(internal/cpushare paces the project over it). A's clients run in a process of their own, started for each busy phase. Idle and busy phases of %s alternate, %d of each (`go run ./bench -only noisy`).\n\n",
		r.share, r.phase, noisyPairs)
	fmt.Fprintf(&b, "| phase pair | B p50 / p99, A idle | B p50 / p99, A busy | p99 busy ÷ idle |\n|---|---|---|---|\n")
	for i := range r.idleP99 {
		fmt.Fprintf(&b, "| %d | %.2f / %.2f ms | %.2f / %.2f ms | %.2f |\n", i+1, r.idleP50[i], r.idleP99[i], r.busyP50[i], r.busyP99[i],
			r.busyP99[i]/r.idleP99[i])
	}
	ratio := pairedRatios(r.busyP99, r.idleP99)
	fmt.Fprintf(&b, "\nB achieved %.0f/s idle and %.0f/s busy; B's errors: %d. A, while busy: %d answered 200 (%.0f/s), %d refused 503 "+
		"(over its share, or a row busy past the lock timeout), %d other.\n\n", r.idleQPS, r.busyQPS, r.bErrs, r.aDone,
		float64(r.aDone)/r.aSecs, r.aOver, r.aOther)
	fmt.Fprintf(&b, "| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| B's p99 with A busy ÷ with A idle (median of the paired ratios) | ≤ 2 | %s | %s |\n", ratio, verdict(ratio.median <= 2))
	fmt.Fprintf(&b, "| B's p50 with A busy ÷ with A idle (median of the paired ratios) | (reported) | %s | |\n", pairedRatios(r.busyP50, r.idleP50))
	fmt.Fprintf(&b, "| B's requests failed | 0 | %d | %s |\n", r.bErrs, verdict(r.bErrs == 0))
	return b.String()
}

// hammerMain is project A's clients (bench -hammer ROUTER,APPID,TOKEN,CARD):
// they write until interrupted, then print how many were answered 200, 503
// and otherwise, counting only what was answered after their first second
// (the phase being measured starts then).
func hammerMain(arg string) {
	parts := strings.Split(arg, ",")
	a := client{base: parts[0], p: devstack.ProjectCredentials{AppID: parts[1], AppToken: parts[2]},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}}
	var done, over, other atomic.Int64
	start := time.Now().Add(time.Second)
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	go func() { <-sig; close(stop) }()
	noisy.Run(a.do, parts[3], stop, nil, func(status int) {
		switch {
		case time.Now().Before(start):
		case status == 200:
			done.Add(1)
		case status == 503:
			over.Add(1)
		default:
			other.Add(1)
		}
	})
	fmt.Println(done.Load(), over.Load(), other.Load())
}
