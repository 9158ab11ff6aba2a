package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
)

type earningResult struct {
	orders, seen       int
	orderQPS           float64
	visP50, visP99     float64
	visMax             float64
	orderErrs          int
	redeemQPS          float64
	redeemN            int64
	redP50, redP95     float64
	redP99             float64
	redeemErrs         int64
	transferQPS        float64
	transferN          int64
	trP50, trP95       float64
	trP99              float64
	transferErrs       int64
	pollEvery          time.Duration
	customers, redeems int
}

// orderer is one load-generation thread paying orders for its customers;
// sent records when each order's request left.
type orderer struct {
	c      client
	id     int
	n      int
	custs  []string
	mu     *sync.Mutex
	sent   map[string]time.Time
	errors *int
}

func (o *orderer) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	o.n++
	src := fmt.Sprintf("bo-%d-%d", o.id, o.n)
	cust := o.custs[(o.id+o.n)%len(o.custs)]
	o.mu.Lock()
	o.sent[src] = time.Now()
	o.mu.Unlock()
	status, _, err := o.c.do("POST", "/v1/orders", map[string]any{"source_id": src, "status": "PAID", "amount": 2500,
		"customer": map[string]any{"source_id": cust}})
	if err != nil || status != 200 {
		o.mu.Lock()
		*o.errors++
		delete(o.sent, src)
		o.mu.Unlock()
		return false, ""
	}
	return true, ""
}

// redeemer redeems a one-point reward from its own card.
type redeemer struct {
	c            client
	code, reward string
}

func (r *redeemer) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	status, _, err := r.c.do("POST", "/v1/loyalties/members/"+r.code+"/redemption", map[string]any{"reward": map[string]any{"id": r.reward}})
	return err == nil && status == 200, ""
}

// transferrer moves one point from its first card to its second, which
// the interface writes as a transfer into the second.
type transferrer struct {
	c              client
	campaign, from string
	to             string
}

func (r *transferrer) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	status, _, err := r.c.do("POST", "/v1/loyalties/"+r.campaign+"/members/"+r.to+"/transfers",
		[]map[string]any{{"code": r.from, "points": 1}})
	return err == nil && status == 200, ""
}

// benchEarning measures the asynchronous phase's accruals and the
// synchronous phase's redemptions, both through the router.
func benchEarning(stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration) (earningResult, error) {
	r := earningResult{pollEvery: 10 * time.Millisecond, customers: 200, redeems: 8}
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench earning"})
	if err != nil {
		return r, err
	}
	campID := camp["id"].(string)
	// The answer is a list, which client.do does not decode.
	if status, _, _ := c.do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid",
		"source": map[string]any{"banner": "Ten per order"}, "loyalty": map[string]any{"type": "FIXED", "points": 10}}}); status != 200 {
		return r, fmt.Errorf("earning rule: %d", status)
	}
	var custs []string
	for i := 0; i < r.customers; i++ {
		src := fmt.Sprintf("earner-%d", i)
		if _, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": src}}); err != nil {
			return r, err
		}
		custs = append(custs, src)
	}
	if err := earningOrders(&r, c, campID, custs, d); err != nil {
		return r, err
	}
	if err := earningRedeems(&r, c, campID, d); err != nil {
		return r, err
	}
	return r, earningTransfers(&r, c, campID, d)
}

// earningOrders measures paid orders at 200/s. One watcher reads the
// campaign's newest transactions every pollEvery: an order's accrual is
// visible when a read first shows its entry (an entry's source_id is its
// order's).
func earningOrders(r *earningResult, c client, campID string, custs []string, d time.Duration) error {
	fmt.Fprintln(os.Stderr, "bench: paid orders at 200/s, accruals watched in the campaign's history")
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lags []float64
	seen := map[string]bool{}
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		t := time.NewTicker(r.pollEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				watched <- nil
				return
			case <-t.C:
			}
			_, m, err := c.do("GET", "/v1/loyalties/"+campID+"/transactions?order=-id&limit=100", nil)
			now := time.Now()
			if err != nil {
				watched <- err
				return
			}
			data, _ := m["data"].([]any)
			mu.Lock()
			for _, x := range data {
				src, _ := x.(map[string]any)["source_id"].(string)
				if at, ok := sent[src]; ok && !seen[src] {
					seen[src] = true
					lags = append(lags, float64(now.Sub(at).Microseconds())/1000)
				}
			}
			mu.Unlock()
		}
	}()
	const threads = 16
	var runners []periodic.Runnable
	for i := 0; i < threads; i++ {
		runners = append(runners, &orderer{c: c, id: i, custs: custs, mu: &mu, sent: sent, errors: &r.orderErrs})
	}
	ro := periodic.RunnerOptions{QPS: 200, Duration: d, NumThreads: threads, Out: io.Discard, Uniform: true}
	pr := periodic.NewPeriodicRunner(&ro)
	copy(pr.Options().Runners, runners)
	res := pr.Run()
	r.orderQPS = res.ActualQPS
	// The stragglers: give every accrual up to 10 s to show.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := len(seen) >= len(sent)
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	if err := <-watched; err != nil {
		return err
	}
	mu.Lock()
	r.orders, r.seen = len(sent), len(seen)
	sort.Float64s(lags)
	if len(lags) > 0 {
		r.visP50, r.visP99, r.visMax = quantile(lags, 0.50), quantile(lags, 0.99), lags[len(lags)-1]
	}
	mu.Unlock()
	return nil
}

// earningRedeems measures redemptions of a one-point reward, each client
// on its own card.
func earningRedeems(r *earningResult, c client, campID string, d time.Duration) error {
	fmt.Fprintln(os.Stderr, "bench: pay-with-points redemptions at 200/s, 8 clients")
	w, err := c.must("POST", "/v1/rewards", map[string]any{"name": "Bench sticker", "parameters": map[string]any{"product": map[string]any{"id": "prod_bench"}}})
	if err != nil {
		return err
	}
	if _, err := c.must("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": w["id"],
		"parameters": map[string]any{"loyalty": map[string]any{"points": 1}}}); err != nil {
		return err
	}
	var reds []periodic.Runnable
	for i := 0; i < r.redeems; i++ {
		m, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("spender-%d", i)}})
		if err != nil {
			return err
		}
		code := m["code"].(string)
		if _, err := c.must("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1_000_000}); err != nil {
			return err
		}
		reds = append(reds, &redeemer{c: c, code: code, reward: w["id"].(string)})
	}
	rr := at200(reds, d)
	r.redeemQPS, r.redeemN, r.redeemErrs = rr.ActualQPS, rr.DurationHistogram.Count, rr.ErrorsDurationHistogram.Count
	r.redP50, r.redP95, r.redP99 = percentiles(rr)
	return nil
}

// earningTransfers measures transfers between two cards of one campaign,
// each client its own pair.
func earningTransfers(r *earningResult, c client, campID string, d time.Duration) error {
	fmt.Fprintln(os.Stderr, "bench: transfers between two cards at 200/s, 8 clients")
	var trs []periodic.Runnable
	for i := 0; i < r.redeems; i++ {
		var codes [2]string
		for j := range codes {
			m, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("mover-%d-%d", i, j)}})
			if err != nil {
				return err
			}
			codes[j] = m["code"].(string)
		}
		if _, err := c.must("POST", "/v1/loyalties/members/"+codes[0]+"/balance", map[string]any{"points": 1_000_000}); err != nil {
			return err
		}
		trs = append(trs, &transferrer{c: c, campaign: campID, from: codes[0], to: codes[1]})
	}
	tr := at200(trs, d)
	r.transferQPS, r.transferN, r.transferErrs = tr.ActualQPS, tr.DurationHistogram.Count, tr.ErrorsDurationHistogram.Count
	r.trP50, r.trP95, r.trP99 = percentiles(tr)
	return nil
}

// at200 runs the runners, one thread each, at a fixed, evenly spread 200
// requests a second for d, after a 2 s warm-up.
func at200(runners []periodic.Runnable, d time.Duration) periodic.RunnerResults {
	run := func(d time.Duration) periodic.RunnerResults {
		ro := periodic.RunnerOptions{QPS: 200, Duration: d, NumThreads: len(runners), Percentiles: []float64{50, 95, 99},
			Out: io.Discard, Uniform: true}
		pr := periodic.NewPeriodicRunner(&ro)
		copy(pr.Options().Runners, runners)
		return pr.Run()
	}
	run(2 * time.Second)
	return run(d)
}

// percentiles are a run's p50, p95 and p99 in milliseconds.
func percentiles(rr periodic.RunnerResults) (p50, p95, p99 float64) {
	for _, x := range rr.DurationHistogram.Percentiles {
		switch x.Percentile {
		case 50:
			p50 = x.Value * 1000
		case 95:
			p95 = x.Value * 1000
		case 99:
			p99 = x.Value * 1000
		}
	}
	return p50, p95, p99
}

// quantile of sorted xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

func earningReport(r earningResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Earning and spending points\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- **Accrual.** 16 clients pay orders (`POST /v1/orders`, status PAID) at a fixed, evenly spread 200/s for %d "+
		"customers, each holding a card of a campaign with one earning rule. The accrual runs in the asynchronous phase. "+
		"A watcher reads the campaign's newest 100 transactions every %s. An order's accrual is visible at the first read that "+
		"shows its entry. The figure runs from the moment the order's request was sent, and is measured to within that %s.\n",
		r.customers, r.pollEvery, r.pollEvery)
	fmt.Fprintf(&b, "- **Redemption.** %d clients, each on its own card, redeem a one-point reward at a fixed 200/s "+
		"(`POST /v1/loyalties/members/{memberId}/redemption`).\n", r.redeems)
	fmt.Fprintf(&b, "- **Transfer.** %d clients, each with its own pair of cards, move one point from the first to the second at a "+
		"fixed 200/s (`POST /v1/loyalties/{campaignId}/members/{memberId}/transfers`).\n\n", r.redeems)
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| paid orders | %d at %.0f/s, %d failed; %d accruals seen |\n", r.orders, r.orderQPS, r.orderErrs, r.seen)
	fmt.Fprintf(&b, "| paid order to accrual visible in history | p50 %.0f ms, p99 %.0f ms, max %.0f ms |\n", r.visP50, r.visP99, r.visMax)
	fmt.Fprintf(&b, "| redemptions | %d at %.0f/s, %d errors; p50 %.2f ms, p95 %.2f ms, p99 %.2f ms |\n", r.redeemN, r.redeemQPS,
		r.redeemErrs, r.redP50, r.redP95, r.redP99)
	fmt.Fprintf(&b, "| transfers | %d at %.0f/s, %d errors; p50 %.2f ms, p95 %.2f ms, p99 %.2f ms |\n", r.transferN, r.transferQPS,
		r.transferErrs, r.trP50, r.trP95, r.trP99)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| paid order to accrual visible, p99 at 200 orders/s | ≤ 1 s | %.0f ms (%d of %d seen) | %s |\n", r.visP99, r.seen, r.orders,
		verdict(r.visP99 <= 1000 && r.seen == r.orders && r.orders > 0))
	fmt.Fprintf(&b, "| redemption through the router, p50 / p95 | ≤ 5 ms / ≤ 15 ms | %.2f / %.2f ms | %s |\n", r.redP50, r.redP95,
		verdict(r.redP50 <= 5 && r.redP95 <= 15 && r.redeemErrs == 0))
	return b.String()
}
