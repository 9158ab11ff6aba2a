package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

type engineResult struct {
	valP50, valP95, valQPS    float64
	valErrs                   int64
	redP50, redP95, redQPS    float64
	redErrs                   int64
	qualP50, qualP95, qualQPS float64
	qualErrs                  int64
	qualCandidates            int
	sat, pgbench              float64
	satRounds, pgbRounds      []float64
	satErrs                   int64
	client                    clientVsServer
	valCPU, redCPU, qualCPU   cpuShare // of the measured phases at 200/s
	cpuRounds                 cpuRounds
}

// engineCall is one load thread of the engine section: it sends body(),
// a fresh body for each request, to path.
type engineCall struct {
	c    client
	path string
	body func() map[string]any
	errs *atomic.Int64
}

func (e *engineCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	b, _ := json.Marshal(e.body())
	res, err := e.c.send("POST", e.path, bytes.NewReader(b), "application/json")
	if err != nil {
		e.errs.Add(1)
		return false, ""
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		if e.errs.Add(1) <= 3 {
			msg, _ := io.ReadAll(res.Body)
			fmt.Fprintf(os.Stderr, "bench: %s: %d %s\n", e.path, res.StatusCode, msg)
		}
		return false, ""
	}
	_, _ = io.Copy(io.Discard, res.Body) // the load generator reads, not decodes: its CPU is the server's too
	return true, ""
}

// codesOf pages through a campaign's vouchers, as GET /v1/vouchers lists them.
func codesOf(c client, campaignID string, n int) ([]string, error) {
	var out []string
	for after := ""; len(out) < n; {
		path := "/v1/vouchers?campaign_id=" + campaignID + "&limit=100&order=created_at"
		if after != "" {
			path += "&starting_after_id=" + after
		}
		l, err := c.must("GET", path, nil)
		if err != nil {
			return nil, err
		}
		vs, _ := l["vouchers"].([]any)
		for _, v := range vs {
			out = append(out, v.(map[string]any)["code"].(string))
		}
		if after, _ = l["more_starting_after"].(string); after == "" || len(vs) == 0 {
			break
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("campaign %s: %d vouchers of %d", campaignID, len(out), n)
	}
	return out, nil
}

// benchEngine measures the promotion engine's hot path through the router:
// stacked validation and redemption of three redeemables on a ten-item
// order and qualifications over a thousand campaigns, each at 200
// requests/s, and redemptions of distinct vouchers at saturation beside
// pgbench's TPC-B-like on the same server.
func benchEngine(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server, d time.Duration, profile string) (engineResult, error) {
	var r engineResult
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	fmt.Fprintln(os.Stderr, "bench: engine: campaigns and vouchers")
	f, err := engineSetup(c, d)
	if err != nil {
		return r, err
	}
	if err := f.stacked(&r, stack, p, d, profile); err != nil {
		return r, err
	}
	if err := f.qualifications(&r, d, profile); err != nil {
		return r, err
	}
	if engineCPUServe {
		return r, f.serveCPURounds(d, f.redNext)
	}
	if engineCPURounds > 0 {
		if r.cpuRounds, err = f.cpuRoundsRun(engineCPURounds, d, f.redNext); err != nil {
			return r, err
		}
	}
	if engineCPUOnly {
		return r, nil
	}
	return r, f.saturation(&r, srv, d)
}

// engineFixture is what the engine section sets up before it measures:
// the vouchers of its campaigns (each redeemed once at most), the rule on
// the order, and the order's items.
type engineFixture struct {
	c                        client
	rule                     map[string]any
	amounts, percents, gifts []string
	sats                     []string
	items                    []any
	next                     atomic.Int64 // the stacks' next vouchers
	redNext                  int64        // the first the redemptions did not take
}

// engineSetup makes the section's campaigns and reads their codes: enough
// distinct vouchers for every redemption the section makes.
func engineSetup(c client, d time.Duration) (*engineFixture, error) {
	f := &engineFixture{c: c}
	perRun := int(200*(d+3*time.Second)/time.Second) + 100
	// And the CPU rounds' redemptions (engine_cpu.go).
	n := perRun*2 + engineCPURounds*cpuRoundVouchers(d)
	satN := 60_000
	campaign := func(name, typ string, n int, voucher map[string]any) (string, error) {
		camp, err := c.must("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": typ, "vouchers_count": n, "voucher": voucher})
		if err != nil {
			return "", err
		}
		if id, _ := camp["async_action_id"].(string); id != "" {
			if _, err := c.await(id, 5*time.Minute); err != nil {
				return "", err
			}
		}
		return camp["id"].(string), nil
	}
	amountID, err := campaign("Engine amounts", "DISCOUNT_COUPONS", n, map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 500, "effect": "APPLY_TO_ITEMS_PROPORTIONALLY"}})
	if err != nil {
		return nil, err
	}
	percentID, err := campaign("Engine percents", "DISCOUNT_COUPONS", n, map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 10, "amount_limit": 2000}})
	if err != nil {
		return nil, err
	}
	giftID, err := campaign("Engine gifts", "GIFT_VOUCHERS", n, map[string]any{"type": "GIFT_VOUCHER",
		"gift": map[string]any{"amount": 100_000}})
	if err != nil {
		return nil, err
	}
	satID := ""
	if engineCPUOnly {
		satN = 0 // no saturation phase
	} else if satID, err = campaign("Engine saturation", "DISCOUNT_COUPONS", satN, map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}, "redemption": map[string]any{"quantity": 1}}); err != nil {
		return nil, err
	}
	// The percent campaign's vouchers carry a validation rule on the order.
	if f.rule, err = c.must("POST", "/v1/validation-rules", map[string]any{"name": "engine bench", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{1000}}}, "logic": "1"}}); err != nil {
		return nil, err
	}
	if _, err := c.must("POST", "/v1/validation-rules/"+f.rule["id"].(string)+"/assignments",
		map[string]any{"related_object_type": "campaign", "related_object_id": percentID}); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		id  string
		n   int
		dst *[]string
	}{{amountID, n, &f.amounts}, {percentID, n, &f.percents}, {giftID, n, &f.gifts}, {satID, satN, &f.sats}} {
		if x.n == 0 {
			continue
		}
		if *x.dst, err = codesOf(c, x.id, x.n); err != nil {
			return nil, err
		}
	}
	f.items = make([]any, 10)
	for i := range f.items {
		f.items[i] = map[string]any{"product_id": fmt.Sprintf("prod_bench_%d", i), "quantity": 1 + i%3, "price": 1500 + 250*i}
	}
	return f, nil
}

// stack3 is the next request of the three redeemables, on vouchers of
// its own.
func (f *engineFixture) stack3() map[string]any {
	i := int(f.next.Add(1)) % len(f.amounts)
	return map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("eng-%d", i%200)},
		"order": map[string]any{"items": f.items},
		"redeemables": []any{map[string]any{"object": "voucher", "id": f.amounts[i]}, map[string]any{"object": "voucher", "id": f.percents[i]},
			map[string]any{"object": "voucher", "id": f.gifts[i], "gift": map[string]any{"credits": 1000}}}}
}

// runners are n load threads sending body() to path, counting errors in
// errs.
func (f *engineFixture) runners(path string, body func() map[string]any, errs *atomic.Int64, n int) []periodic.Runnable {
	out := make([]periodic.Runnable, n)
	for i := range out {
		out[i] = &engineCall{c: f.c, path: path, body: body, errs: errs}
	}
	return out
}

// stacked measures validation and redemption of the three at 200/s, then
// the same validations client-side beside server-side ones. The phases'
// CPU profiles, when asked, go to profile.validation and
// profile.redemption.
func (f *engineFixture) stacked(r *engineResult, stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration, profile string) error {
	suffixed := func(what string) string {
		if profile == "" {
			return ""
		}
		return profile + "." + what
	}
	fmt.Fprintln(os.Stderr, "bench: engine: stacked validation at 200/s")
	perRun := int(200*(d+3*time.Second)/time.Second) + 100
	var valErrs, redErrs atomic.Int64
	v, cpu, err := atRateCPU(200, f.runners("/v1/validations", f.stack3, &valErrs, 16), d, suffixed("validation"))
	if err != nil {
		return err
	}
	r.valCPU = cpu
	fmt.Fprintf(os.Stderr, "bench: engine: CPU per validation: %s\n", cpu)
	r.valP50, r.valP95, _ = percentiles(v)
	r.valQPS, r.valErrs = v.ActualQPS, valErrs.Load()
	fmt.Fprintln(os.Stderr, "bench: engine: stacked redemption at 200/s")
	f.next.Store(int64(perRun)) // vouchers the validations did not touch
	red, cpu, err := atRateCPU(200, f.runners("/v1/redemptions", f.stack3, &redErrs, 16), d, suffixed("redemption"))
	if err != nil {
		return err
	}
	r.redCPU = cpu
	f.redNext = f.next.Load()
	fmt.Fprintf(os.Stderr, "bench: engine: CPU per redemption: %s\n", cpu)
	r.redP50, r.redP95, _ = percentiles(red)
	r.redQPS, r.redErrs = red.ActualQPS, redErrs.Load()
	if engineCPUOnly {
		return nil
	}
	// The validations leave the vouchers as they were.
	f.next.Store(0)
	r.client, err = benchClientValidations(stack, p, f.c, f.stack3, d)
	return err
}

// qualifications measures qualifications at 200/s over 1,000 PROMOTION
// campaigns of a tier each (one in ten guarded by the rule on the order,
// which this order meets), for a customer holding vouchers of ten
// discount campaigns.
func (f *engineFixture) qualifications(r *engineResult, d time.Duration, profile string) error {
	fmt.Fprintln(os.Stderr, "bench: engine: 1,000 promotion campaigns and tiers, a wallet of 10")
	r.qualCandidates = 1000
	if err := f.promotions(r.qualCandidates); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: engine: qualifications at 200/s")
	var qualErrs atomic.Int64
	// The profile file, when asked, is the qualifications', the slowest of
	// the engine's calls.
	q, cpu, err := atRateCPU(200, f.runners("/v1/qualifications", f.qualBody, &qualErrs, 16), d, profile)
	if err != nil {
		return err
	}
	r.qualCPU = cpu
	fmt.Fprintf(os.Stderr, "bench: engine: CPU per qualification: %s\n", cpu)
	r.qualP50, r.qualP95, _ = percentiles(q)
	r.qualQPS, r.qualErrs = q.ActualQPS, qualErrs.Load()
	return nil
}

// qualBody is a qualifications request: the wallet's customer, the
// ten-item order, 50 a page.
func (f *engineFixture) qualBody() map[string]any {
	return map[string]any{"customer": map[string]any{"source_id": "engine-wallet"}, "order": map[string]any{"items": f.items},
		"options": map[string]any{"limit": 50}}
}

// promotions makes n PROMOTION campaigns of a tier each, and the first
// ten a discount campaign with a voucher published to the wallet's
// customer, on eight workers.
func (f *engineFixture) promotions(n int) error {
	c := f.c
	jobs, errc := make(chan int), make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				tier := map[string]any{"name": fmt.Sprintf("Tier %04d", i), "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i}}}
				if i%10 == 0 {
					tier["validation_rules"] = []any{f.rule["id"]}
				}
				if _, err := c.must("POST", "/v1/campaigns", map[string]any{"name": fmt.Sprintf("Engine promotion %04d", i),
					"campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{tier}}}); err != nil {
					errc <- err
					return
				}
				if i >= 10 {
					continue
				}
				name := fmt.Sprintf("Engine wallet %04d", i)
				if _, err := c.must("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS",
					"vouchers_count": 1, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
						"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i}}}); err != nil {
					errc <- err
					return
				}
				if _, err := c.must("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": name},
					"customer": map[string]any{"source_id": "engine-wallet"}}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case err := <-errc:
			close(jobs)
			wg.Wait()
			return err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// saturation measures redemptions of distinct vouchers at saturation,
// beside pgbench, in rounds.
func (f *engineFixture) saturation(r *engineResult, srv *pglocal.Server, d time.Duration) error {
	const threads = 32
	var satNext, satErrs atomic.Int64
	one := func() map[string]any {
		i := int(satNext.Add(1)) % len(f.sats)
		return map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": f.sats[i]}},
			"order": map[string]any{"amount": 5000}}
	}
	pgb, err := newPgbench(srv, threads)
	if err != nil {
		return err
	}
	r.satRounds, r.pgbRounds, err = pgb.alternate("engine: redemptions at saturation", d, func(_ int, d time.Duration) (float64, error) {
		ro := periodic.RunnerOptions{QPS: -1, Duration: d, NumThreads: threads, Out: io.Discard}
		pr := periodic.NewPeriodicRunner(&ro)
		copy(pr.Options().Runners, f.runners("/v1/redemptions", one, &satErrs, threads))
		return pr.Run().ActualQPS, nil
	})
	if err != nil {
		return err
	}
	r.sat, r.pgbench, r.satErrs = mean(r.satRounds), mean(r.pgbRounds), satErrs.Load()
	if int(satNext.Load()) > len(f.sats) {
		return fmt.Errorf("saturation used %d redemptions of %d vouchers: make more", satNext.Load(), len(f.sats))
	}
	return nil
}

func engineReport(r engineResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Promotion engine\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on. "+
		"Validation and redemption stack three redeemables, each request its own: an AMOUNT voucher split proportionally over the "+
		"items, a PERCENT voucher with an amount limit whose campaign carries a validation rule on the order, and a gift card "+
		"giving 10.00 of credits, on a ten-item order, for one of 200 customers; 16 clients at an even 200 requests/s after a 2 s "+
		"warm-up. Qualifications: %d PROMOTION campaigns of one tier each (one in ten guarded by a validation rule) and a customer "+
		"holding vouchers of ten discount campaigns, a ten-item order, 50 a page (the project's tiers are read at most once a second). "+
		"CPU per request: each phase's CPU profile summed by the servers' pprof labels over the phase's requests; then the three "+
		"paths in rounds (`-engine-cpu-rounds`, half a phase each, the paths' order rotating round by round, a profile each), "+
		"reported as the median round with the least and the most, since one phase's figure moves between runs by more than a "+
		"change of a fifth (`-engine-cpu-ab` compares two builds in one run). "+
		"Saturation: redemptions of one distinct voucher each, 32 clients, alternating with pgbench's TPC-B-like (32 clients) on "+
		"the same server, three rounds of each, each after a CHECKPOINT.\n\n", time.Now().UTC().Format("2006-01-02"), r.qualCandidates)
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| `POST /v1/validations`, 3 redeemables, 10 items (%.0f/s achieved, %d errors) | p50 %.2f ms, p95 %.2f ms |\n",
		r.valQPS, r.valErrs, r.valP50, r.valP95)
	fmt.Fprintf(&b, "| `POST /v1/redemptions`, the same (%.0f/s achieved, %d errors) | p50 %.2f ms, p95 %.2f ms |\n",
		r.redQPS, r.redErrs, r.redP50, r.redP95)
	fmt.Fprintf(&b, "| `POST /v1/qualifications`, %d campaigns and tiers, a wallet of 10 (%.0f/s achieved, %d errors) | p50 %.2f ms, p95 %.2f ms |\n",
		r.qualCandidates, r.qualQPS, r.qualErrs, r.qualP50, r.qualP95)
	cv := r.client
	fmt.Fprintf(&b, "| the validation, server-side beside client-side from %d addresses, %d interleaved rounds of %s each at 200/s "+
		"(p50/p95 per round; %d and %d errors) | server %s ms; client %s ms |\n", clientAddresses, rounds, "a phase",
		cv.srvErrs, cv.cliErrs, roundsOf(cv.srvRounds), roundsOf(cv.cliRounds))
	for _, x := range []struct {
		what string
		cpu  cpuShare
	}{{"validation", r.valCPU}, {"redemption", r.redCPU}, {"qualification", r.qualCPU}} {
		fmt.Fprintf(&b, "| CPU per %s (the phase's CPU profile, %d requests): regional service / router / platform / whole process "+
			"(with the load generator and the runtime) | %.2f / %.2f / %.2f / %.2f ms |\n", x.what, x.cpu.requests,
			x.cpu.regional, x.cpu.router, x.cpu.service(), x.cpu.whole())
	}
	b.WriteString(r.cpuRounds.rows())
	fmt.Fprintf(&b, "| redemptions at saturation, distinct vouchers, 32 clients | %.0f/s (rounds %s; %d errors) |\n", r.sat, joinRounds(r.satRounds), r.satErrs)
	fmt.Fprintf(&b, "| pgbench TPC-B-like, 32 clients, same server | %.0f tps (rounds %s) |\n", r.pgbench, joinRounds(r.pgbRounds))
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| stackable validation p50 / p95 | ≤ 5 / 15 ms | %.2f / %.2f ms | %s |\n", r.valP50, r.valP95,
		verdict(r.valP50 <= 5 && r.valP95 <= 15 && r.valErrs == 0))
	fmt.Fprintf(&b, "| stackable redemption p50 / p95 | ≤ 10 / 25 ms | %.2f / %.2f ms | %s |\n", r.redP50, r.redP95,
		verdict(r.redP50 <= 10 && r.redP95 <= 25 && r.redErrs == 0))
	fmt.Fprintf(&b, "| qualifications p50 / p95 | ≤ 10 / 30 ms | %.2f / %.2f ms | %s |\n", r.qualP50, r.qualP95,
		verdict(r.qualP50 <= 10 && r.qualP95 <= 30 && r.qualErrs == 0))
	fmt.Fprintf(&b, "| `POST /client/v1/validations` from %d addresses, p50 / p95 (median rounds) | within 1 ms of `/v1/validations` "+
		"(%.2f / %.2f ms) | %.2f / %.2f ms | %s |\n", clientAddresses, cv.srvP50, cv.srvP95, cv.cliP50, cv.cliP95,
		verdict(cv.cliP50-cv.srvP50 <= 1 && cv.cliP95-cv.srvP95 <= 1 && cv.cliErrs == 0))
	fmt.Fprintf(&b, "| redemptions/s ÷ pgbench tps | ≥ 0.3 | %.2f | %s |\n", r.sat/r.pgbench, verdict(r.sat >= 0.3*r.pgbench && r.satErrs == 0))
	return b.String()
}
