package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/pglocal"
)

// The hot code's sizes: issue 39's sale day is 120,000 tries at a limit of
// 100,000; smaller ones make a trial quick.
var (
	hotLimit = flag.Int("hotcode-limit", 100_000, "the hot code section's redemption.quantity")
	hotTries = flag.Int("hotcode-tries", 120_000, "the hot code section's redemptions tried")
)

// hotClients is how many clients redeem the one code at once.
const hotClients = 64

type hotcodeResult struct {
	limit, tries              int
	accepted, refused, errs   int64
	redeemed                  int64 // the voucher's redemption.redeemed_quantity read back
	elapsed, lastAccept       time.Duration
	p50, p95, p99             float64
	rate, acceptRate, pgbench float64
	cpuPerTry                 time.Duration // the process's CPU (router and regional service) per try
}

// hotCall is one client of the hot code: each try a new customer and a
// new order.
type hotCall struct {
	c     client
	code  string
	run   string
	next  *atomic.Int64
	r     *hotcodeResult
	start time.Time
	last  *atomic.Int64 // nanoseconds from start to the latest acceptance
}

func (h *hotCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	i := h.next.Add(1)
	b, _ := json.Marshal(map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": h.code}},
		"customer": map[string]any{"source_id": fmt.Sprintf("hot-%s-%d", h.run, i)},
		"order":    map[string]any{"source_id": fmt.Sprintf("hot-order-%s-%d", h.run, i), "amount": 5000}})
	res, err := h.c.send("POST", "/v1/redemptions", bytes.NewReader(b), "application/json")
	if err != nil {
		atomic.AddInt64(&h.r.errs, 1)
		return false, ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	switch {
	case res.StatusCode == 200:
		atomic.AddInt64(&h.r.accepted, 1)
		at := int64(time.Since(h.start))
		for {
			prev := h.last.Load()
			if at <= prev || h.last.CompareAndSwap(prev, at) {
				break
			}
		}
		return true, ""
	case res.StatusCode == 400 && bytes.Contains(body, []byte(`"quantity_exceeded"`)):
		atomic.AddInt64(&h.r.refused, 1)
		return true, ""
	}
	if atomic.AddInt64(&h.r.errs, 1) <= 3 {
		fmt.Fprintf(os.Stderr, "bench: hotcode: %d %s\n", res.StatusCode, body)
	}
	return false, ""
}

// benchHotcode redeems one public code with a redemption limit by 64
// clients at once, each try its own customer and order, more tries than
// the limit, then pgbench's TPC-B-like with as many clients on the same
// server. Exactly the limit must be accepted, and the voucher must say so.
func benchHotcode(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server, d time.Duration, profile string) (hotcodeResult, error) {
	r := hotcodeResult{limit: *hotLimit, tries: *hotTries}
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hotClients}}}
	run := strings.ToLower(ids.Secret(4))
	code := "HOT-" + strings.ToUpper(run)
	if _, err := c.must("POST", "/v1/vouchers", map[string]any{"code": code, "type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "redemption": map[string]any{"quantity": r.limit}}); err != nil {
		return r, err
	}
	// pgbench's tables first, then a CHECKPOINT: the redemptions are not
	// to pay for pgbench -i's writes.
	pgb, err := newPgbench(srv, hotClients)
	if err != nil {
		return r, err
	}
	if err := pgb.checkpoint(); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "bench: hotcode: %d tries of %s (limit %d), %d clients\n", r.tries, code, r.limit, hotClients)
	if profile != "" {
		pf, err := os.Create(profile)
		if err != nil {
			return r, err
		}
		_ = pprof.StartCPUProfile(pf)
	}
	var next, last atomic.Int64
	ro := periodic.RunnerOptions{QPS: -1, Exactly: int64(r.tries), NumThreads: hotClients, Percentiles: []float64{50, 95, 99}, Out: io.Discard}
	pr := periodic.NewPeriodicRunner(&ro)
	start := time.Now()
	for i := range pr.Options().Runners {
		pr.Options().Runners[i] = &hotCall{c: c, code: code, run: run, next: &next, r: &r, start: start, last: &last}
	}
	cpu0 := processCPU()
	res := pr.Run()
	r.elapsed, r.lastAccept = time.Since(start), time.Duration(last.Load())
	r.cpuPerTry = (processCPU() - cpu0) / time.Duration(max(1, r.tries))
	if profile != "" {
		pprof.StopCPUProfile()
	}
	r.p50, r.p95, r.p99 = percentiles(res)
	r.rate = float64(r.accepted+r.refused) / r.elapsed.Seconds()
	r.acceptRate = float64(r.accepted) / r.lastAccept.Seconds()
	v, err := c.must("GET", "/v1/vouchers/"+code, nil)
	if err != nil {
		return r, err
	}
	red, _ := v["redemption"].(map[string]any)
	q, _ := red["redeemed_quantity"].(float64)
	r.redeemed = int64(q)
	fmt.Fprintln(os.Stderr, "bench: hotcode: pgbench TPC-B-like, 64 clients")
	if err := pgb.checkpoint(); err != nil {
		return r, err
	}
	if r.pgbench, err = pgb.run(d); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "bench: hotcode: %.0f tries/s, %.0f accepted/s, p50 %.2f p95 %.2f p99 %.2f ms, CPU %v a try, pgbench %.0f tps\n",
		r.rate, r.acceptRate, r.p50, r.p95, r.p99, r.cpuPerTry, r.pgbench)
	if r.accepted != int64(r.limit) || r.redeemed != int64(r.limit) || r.errs != 0 {
		return r, fmt.Errorf("hotcode: %d accepted, %d refused, %d errors of %d tries at a limit of %d; the voucher says %d redeemed",
			r.accepted, r.refused, r.errs, r.tries, r.limit, r.redeemed)
	}
	return r, nil
}

// processCPU is the CPU time this process (the router and the regional
// service, not PostgreSQL) has used.
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// utime and stime are fields 14 and 15, after the command's parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

func hotcodeReport(r hotcodeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## One hot code\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, through the router. One standalone DISCOUNT_VOUCHER "+
		"with `redemption.quantity` %d, redeemed by %d clients at once as fast as they go, %d tries in all, each with a customer "+
		"and an order of its own (`POST /v1/redemptions`); then pgbench's TPC-B-like with %d clients on the same server, after a "+
		"CHECKPOINT. Latencies are of every try, accepted or refused.\n\n", time.Now().UTC().Format("2006-01-02"), r.limit, hotClients,
		r.tries, hotClients)
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| tries answered | %d accepted, %d refused `quantity_exceeded`, %d errors, in %.1f s |\n", r.accepted, r.refused, r.errs, r.elapsed.Seconds())
	fmt.Fprintf(&b, "| the voucher's `redemption.redeemed_quantity` read back | %d |\n", r.redeemed)
	fmt.Fprintf(&b, "| tries/s (all) | %.0f |\n", r.rate)
	fmt.Fprintf(&b, "| accepted redemptions/s (to the last acceptance, %.1f s) | %.0f |\n", r.lastAccept.Seconds(), r.acceptRate)
	fmt.Fprintf(&b, "| p50 / p95 / p99 | %.2f / %.2f / %.2f ms |\n", r.p50, r.p95, r.p99)
	fmt.Fprintf(&b, "| CPU of the bench process (router, regional service, load) per try | %.2f ms |\n", float64(r.cpuPerTry.Microseconds())/1000)
	fmt.Fprintf(&b, "| pgbench TPC-B-like, %d clients, same server | %.0f tps |\n", hotClients, r.pgbench)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| accepted of %d tries | exactly %d | %d (voucher %d) | %s |\n", r.tries, r.limit, r.accepted, r.redeemed,
		verdict(r.accepted == int64(r.limit) && r.redeemed == int64(r.limit) && r.errs == 0))
	fmt.Fprintf(&b, "| accepted redemptions/s, %d clients | ≥ 1,000 | %.0f | %s |\n", hotClients, r.acceptRate, verdict(r.acceptRate >= 1000))
	fmt.Fprintf(&b, "| accepted redemptions/s ÷ pgbench tps | ≥ 0.3 | %.2f | %s |\n", r.acceptRate/r.pgbench, verdict(r.acceptRate >= 0.3*r.pgbench))
	fmt.Fprintf(&b, "| p99 | ≤ 50 ms | %.2f ms | %s |\n", r.p99, verdict(r.p99 <= 50))
	return b.String()
}
