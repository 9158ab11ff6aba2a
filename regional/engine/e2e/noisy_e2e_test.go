package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/noisy"
	"github.com/tallyhq/tally/devstack/stacktest"
)

// One tenant must never slow another. Project A runs 50 clients of
// conflicting writes on one object each (redemptions of one code, points
// added to one card, stacked redemptions whose two children are rolled
// back at once), as fast as they are answered; project B, on the same
// cluster, reads and writes at a steady 40 a second. None of B's requests
// fails and B's p99 stays within 3× its p99 with A idle: A waits in its
// own line (its plan's share of the instance's connections and, the CPU
// being busy, of its CPU; the row's lock waits bounded), not in B's. Phases alternate, idle and busy four times
// each, so that what else the machine runs meanwhile weighs on both alike,
// and each p99 is of 400 requests, not a maximum. The latencies are
// compared without the race detector only (make test's timing pass): with
// it, every request costs several times the CPU.
func TestANoisyNeighbourDoesNotSlowAnotherProject(t *testing.T) {
	// Not parallel: it measures latencies.
	e := stacktest.Start(t, stacktest.Options{})
	// Both projects on a plan with the default share of the cluster and
	// limits no test reaches.
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/plans/shared", e.MgmtHeader(),
		map[string]any{"features": []string{"webhooks"}, "requests_per_minute": 1_000_000, "requests_per_hour": 1_000_000_000}); r.Status != 200 ||
		r.JSON(t)["cluster_share"] != 0.25 {
		t.Fatalf("plan: %d %s", r.Status, r.Body)
	}
	project := func(name string) stacktest.API {
		r := e.Do(t, "POST", "http://api.localhost/management/v1/projects", e.MgmtHeader(),
			map[string]any{"name": name, "cluster_id": "api", "plan": "shared"})
		if r.Status != 200 {
			t.Fatalf("project: %d %s", r.Status, r.Body)
		}
		m := r.JSON(t)
		key := m["server_side_key"].(map[string]any)
		return stacktest.API{T: t, E: e, P: stacktest.Project{ID: m["id"].(string), Cluster: "api",
			AppID: key["app_id"].(string), AppToken: key["app_token"].(string)}}
	}
	a, b := project("noisy"), project("quiet")
	b.Voucher("CALM", stacktest.PercentOff(10))
	bCamp := b.Campaign("Calm cards", nil)["id"].(string)
	calmCard := b.Member(bCamp, "calm")["code"].(string)

	client := &http.Client{Timeout: 30 * time.Second, Transport: stacktest.ClientFor(e.Stack.RouterURL).Transport}
	do := func(api stacktest.API, method, path string, body any) int {
		return stacktest.Do(t, client, method, stacktest.URL("api", path), api.P.Header(), body).Status
	}
	// A: the bench's noisy neighbour (devstack/noisy), while busy.
	doA := func(method, path string, body any) (int, map[string]any, error) {
		r := stacktest.Do(t, client, method, stacktest.URL("api", path), a.P.Header(), body)
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		return r.Status, m, nil
	}
	hotCard, err := noisy.Setup(doA)
	if err != nil {
		t.Fatal(err)
	}
	var busy atomic.Bool
	var aDone, aFailed atomic.Int64
	stop := make(chan struct{})
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		noisy.Run(doA, hotCard, stop, func() bool { return !busy.Load() }, func(status int) {
			aDone.Add(1)
			if status != 200 {
				aFailed.Add(1) // A may be refused (503) past its share: that is the point
			}
		})
	}()
	defer func() { close(stop); <-ran }()

	// B: a read and a write in turn, 40 a second, for each phase.
	phase := func(n int) []time.Duration {
		var out []time.Duration
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			<-tick.C
			t0 := time.Now()
			var s int
			switch i % 3 {
			case 0:
				s = do(b, "GET", "/v1/vouchers/CALM", nil)
			case 1:
				s = do(b, "POST", "/v1/loyalties/members/"+calmCard+"/balance", map[string]any{"points": 1})
			default:
				s = do(b, "POST", "/v1/customers", map[string]any{"source_id": fmt.Sprintf("calm-%d-%d", len(out), time.Now().UnixNano())})
			}
			if s != 200 {
				t.Errorf("project B's request %d failed: %d", i, s)
			}
			out = append(out, time.Since(t0))
		}
		return out
	}
	p99 := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)*99/100]
	}
	phase(40) // warm
	// Under the race detector every request costs several times the CPU
	// and the latencies are not compared: one round shows B is answered.
	rounds := 4
	if stacktest.RaceEnabled {
		rounds = 1
	}
	measure := func() (pIdle, pLoaded time.Duration) {
		var idle, loaded []time.Duration
		var each []string // each phase's slowest, for a failure's log
		for range rounds {
			busy.Store(false)
			time.Sleep(300 * time.Millisecond) // A's requests under way end
			ds := phase(100)
			idle = append(idle, ds...)
			each = append(each, "idle "+slices.Max(ds).Round(time.Millisecond).String())
			busy.Store(true)
			time.Sleep(300 * time.Millisecond) // A's pile-up forms
			ds = phase(100)
			loaded = append(loaded, ds...)
			each = append(each, "busy "+slices.Max(ds).Round(time.Millisecond).String())
		}
		busy.Store(false)
		t.Logf("each phase's slowest request of B: %v", each)
		return p99(idle), p99(loaded)
	}
	// Issue 32's bound. Connections and lock waits are A's own (the shared
	// pool and deadlocks had B's p99 at seconds, hundreds of times its idle
	// p99); A's ~500 requests a second took most of two cores, which B
	// shares, and read 1.5–4.0× until the instance paced a project over its
	// share of a busy CPU (internal/cpushare): 0.96–1.70× then, and
	// 1.3–2.9× in 2026-11 runs on two cores (1.75–3.05× with the governor's
	// pacing rule of before 3b4802a, so the spread is the machine's). A p99 of
	// 400 requests is their fourth slowest, which one stall of a shared CI
	// machine can make: a measurement over the bound is taken once more,
	// and the test fails when both are over it (a slower B under a busy A
	// is over it every time).
	for attempt := 1; ; attempt++ {
		pIdle, pLoaded := measure()
		t.Logf("B's p99: %v with A idle, %v with A busy (%.2f×); A: %d requests, %d refused", pIdle, pLoaded,
			float64(pLoaded)/float64(pIdle), aDone.Load(), aFailed.Load())
		if pLoaded <= 3*pIdle || stacktest.RaceEnabled {
			break
		}
		if attempt == 2 {
			t.Fatalf("B's p99 with A busy %v is more than 3× its p99 with A idle %v, twice", pLoaded, pIdle)
		}
	}
	if aDone.Load() < 100 {
		t.Fatalf("A made only %d requests: no load", aDone.Load())
	}
}
