package main

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"fortio.org/fortio/fhttp"

	"github.com/tallyhq/tally/devstack"
)

// corsPath is one measured request at saturation.
type corsPath struct {
	name          string
	qps, p50, p99 float64
	errs          int64
	rounds        []float64
}

type corsResult struct{ paths []corsPath }

// benchCORS measures the client-side API's CORS preflight, which the router
// answers itself, at saturation beside a plain application GET through the
// router (a customer read): interleaved rounds, each path's median round.
func benchCORS(stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration) (corsResult, error) {
	const origin = "https://shop.example"
	if err := trustOrigin(stack, p.ProjectID, origin); err != nil {
		return corsResult{}, err
	}
	customerID, err := createCustomer(stack.RouterURL, p)
	if err != nil {
		return corsResult{}, err
	}
	targets := []struct {
		name, method, url string
		status            int
		headers           []string
	}{
		{"preflight, OPTIONS /client/v1/events", "OPTIONS", stack.RouterURL + "/client/v1/events", http.StatusNoContent,
			[]string{"Host: api.localhost", "Origin: " + origin, "Access-Control-Request-Method: POST",
				"Access-Control-Request-Headers: content-type,x-client-application-id,x-client-token,x-voucherify-channel"}},
		{"application GET /v1/customers/{id}", "GET", stack.RouterURL + "/v1/customers/" + customerID, http.StatusOK,
			[]string{"Host: api.localhost", "X-App-Id: " + p.AppID, "X-App-Token: " + p.AppToken}},
	}
	// The router sees the trusted origin with its next directory poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := loadAs("OPTIONS", http.StatusNoContent, targets[0].url, targets[0].headers, 0, 100*time.Millisecond, 1); err == nil {
			break
		} else if time.Now().After(deadline) {
			return corsResult{}, err
		}
		time.Sleep(200 * time.Millisecond)
	}
	runs := make([][]*fhttp.HTTPRunnerResults, len(targets))
	for _, t := range targets { // warm up
		if _, err := loadAs(t.method, t.status, t.url, t.headers, 0, 2*time.Second, 32); err != nil {
			return corsResult{}, err
		}
	}
	for round := 0; round < rounds; round++ {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "bench: %s at saturation, round %d\n", t.name, round+1)
			r, err := loadAs(t.method, t.status, t.url, t.headers, 0, d, 32)
			if err != nil {
				return corsResult{}, err
			}
			runs[i] = append(runs[i], r)
		}
	}
	var out corsResult
	for i, t := range targets {
		rs := runs[i]
		sort.Slice(rs, func(a, b int) bool { return rs[a].ActualQPS < rs[b].ActualQPS })
		mid := rs[len(rs)/2]
		cp := corsPath{name: t.name, qps: mid.ActualQPS, p50: pct(mid, 50), p99: pct(mid, 99), errs: mid.DurationHistogram.Count - mid.RetCodes[t.status]}
		for _, r := range rs {
			cp.rounds = append(cp.rounds, r.ActualQPS)
		}
		out.paths = append(out.paths, cp)
	}
	return out, nil
}

func corsReport(r corsResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Client-side API: CORS preflight\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, one load generator (fortio, 32 connections, "+
		"as fast as it goes) through the router. A browser's preflight (`OPTIONS /client/v1/events` from a trusted origin, "+
		"answered by the router without reaching a region) beside a plain application GET (`GET /v1/customers/{id}` with "+
		"server keys, forwarded to the regional instance); %d interleaved rounds, each path's median round.\n\n",
		time.Now().UTC().Format("2006-01-02"), rounds)
	fmt.Fprintf(&b, "| request | answers/s at saturation (rounds) | p50 ms | p99 ms | errors |\n|---|---|---|---|---|\n")
	for _, p := range r.paths {
		rs := make([]string, len(p.rounds))
		for i, x := range p.rounds {
			rs[i] = fmt.Sprintf("%.0f", x)
		}
		fmt.Fprintf(&b, "| %s | %.0f (%s) | %.3f | %.3f | %d |\n", p.name, p.qps, strings.Join(rs, ", "), p.p50, p.p99, p.errs)
	}
	if len(r.paths) == 2 && r.paths[1].qps > 0 {
		fmt.Fprintf(&b, "\nPreflights answered per plain GET: %.2f×.\n", r.paths[0].qps/r.paths[1].qps)
	}
	return b.String()
}
