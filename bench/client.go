package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// clientAddresses is how many client addresses the client-side
// validations come from, each in turn.
const clientAddresses = 1000

// clientCall is one load thread of client-side requests: the project's
// client keys from a trusted origin, each request from the next of
// clientAddresses addresses (X-Forwarded-For, which the router believes
// from loopback, as from a load balancer in front of it).
type clientCall struct {
	base, path, origin string
	p                  devstack.ProjectCredentials
	hc                 *http.Client
	body               func() map[string]any
	next               *atomic.Int64
	errs               *atomic.Int64
	quiet              bool // a probe: refusals are expected until the settings are in force
}

func (k *clientCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	b, _ := json.Marshal(k.body())
	req, _ := http.NewRequest("POST", k.base+k.path, bytes.NewReader(b))
	req.Host = "api.localhost"
	n := int(k.next.Add(1)) % clientAddresses
	for h, v := range map[string]string{"X-Client-Application-Id": k.p.ClientAppID, "X-Client-Token": k.p.ClientToken,
		"Origin": k.origin, "Content-Type": "application/json", "X-Voucherify-Channel": "Voucherify.js",
		"X-Forwarded-For": fmt.Sprintf("198.18.%d.%d", n/250, 1+n%250)} {
		req.Header.Set(h, v)
	}
	res, err := k.hc.Do(req)
	if err != nil {
		k.errs.Add(1)
		return false, ""
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		if k.errs.Add(1) <= 3 && !k.quiet {
			msg, _ := io.ReadAll(res.Body)
			fmt.Fprintf(os.Stderr, "bench: %s: %d %s\n", k.path, res.StatusCode, msg)
		}
		return false, ""
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return true, ""
}

// clientVsServer is the client-side validation beside the server-side one.
type clientVsServer struct {
	srvP50, srvP95, cliP50, cliP95 float64 // medians of the rounds, ms
	srvRounds, cliRounds           [][2]float64
	srvErrs, cliErrs               int64
}

// benchClientValidations runs the same stacked validations at 200/s
// through the router, server-side (/v1/validations, server keys) and
// client-side (/client/v1/validations from clientAddresses addresses
// under the project's per-address limit), in interleaved rounds.
func benchClientValidations(stack *devstack.Stack, p devstack.ProjectCredentials, c client, body func() map[string]any,
	d time.Duration) (clientVsServer, error) {
	const origin = "https://shop.example"
	var out clientVsServer
	ctx := context.Background()
	if err := trustOrigin(stack, p.ProjectID, origin); err != nil {
		return out, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next, srvErrs, cliErrs atomic.Int64
	probe := clientCall{base: stack.RouterURL, path: "/client/v1/validations", origin: origin, p: p, hc: hc, body: body,
		next: &next, errs: new(atomic.Int64), quiet: true}
	// The router and the region see the trusted origin with their next poll.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ok, _ := probe.Run(ctx, 0); ok {
			break
		} else if time.Now().After(deadline) {
			return out, fmt.Errorf("client-side validations refused after 15 s")
		}
	}
	server := make([]periodic.Runnable, 16)
	clients := make([]periodic.Runnable, 16)
	for i := range server {
		server[i] = &engineCall{c: c, path: "/v1/validations", body: body, errs: &srvErrs}
		clients[i] = &clientCall{base: stack.RouterURL, path: "/client/v1/validations", origin: origin, p: p, hc: hc, body: body,
			next: &next, errs: &cliErrs}
	}
	for round := 0; round < rounds; round++ {
		fmt.Fprintf(os.Stderr, "bench: engine: round %d: validations at 200/s, server-side then client-side from %d addresses\n",
			round+1, clientAddresses)
		s := at200(server, d)
		p50, p95, _ := percentiles(s)
		out.srvRounds = append(out.srvRounds, [2]float64{p50, p95})
		k := at200(clients, d)
		c50, c95, _ := percentiles(k)
		out.cliRounds = append(out.cliRounds, [2]float64{c50, c95})
		fmt.Fprintf(os.Stderr, "  server p50 %.2f p95 %.2f ms; client p50 %.2f p95 %.2f ms\n", p50, p95, c50, c95)
	}
	med := func(rs [][2]float64, i int) float64 {
		xs := make([]float64, len(rs))
		for j, r := range rs {
			xs[j] = r[i]
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	out.srvP50, out.srvP95, out.cliP50, out.cliP95 = med(out.srvRounds, 0), med(out.srvRounds, 1), med(out.cliRounds, 0), med(out.cliRounds, 1)
	out.srvErrs, out.cliErrs = srvErrs.Load(), cliErrs.Load()
	return out, nil
}

func roundsOf(rs [][2]float64) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%.2f/%.2f", r[0], r[1])
	}
	return b.String()
}

// trustOrigin makes origin the project's one allowed website URL, in the
// directory; routers and regions see it with their next poll.
func trustOrigin(stack *devstack.Stack, projectID, origin string) error {
	ctx := context.Background()
	return db.InTx(ctx, stack.Tenancy, func(tx pgx.Tx) error {
		pr, err := tenancy.GetProject(ctx, tx, projectID)
		if err != nil {
			return err
		}
		pr.Settings.ClientTrustedDomains = []string{origin}
		return tenancy.UpdateProject(ctx, tx, &pr)
	})
}
