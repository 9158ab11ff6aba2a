package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/pglocal"
)

type eventsResult struct {
	fixedQPS, fixedP50, fixedP99 float64 // POST /v1/events at 500/s, ms
	fixedErrs                    int64
	accrualP50, accrualP99       float64 // event to accrual in the history, ms
	accrualSamples               int
	sat                          float64 // events/s at saturation, mean of rounds
	satRounds, pgbRounds         []float64
	pgbench                      float64
	satErrs                      int64
	drainSecs                    float64 // after saturation, until the accrual tasks are all done
	drained                      int     // tasks pending when saturation ended
	fixedDB                      string  // the database during the 500/s phase
	fixedBacklog                 int     // accrual tasks pending when it ended
}

// eventSender is one load thread: it sends its customer's events, which
// earn on its card.
type eventSender struct {
	c    client
	body []byte
}

func (e *eventSender) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	res, err := e.c.send("POST", "/v1/events", bytes.NewReader(e.body), "application/json")
	if err != nil {
		return false, ""
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == 200, ""
}

// benchEvents measures POST /v1/events: at 500 events/s (the answer, and
// the time until the event's accrual is in the card's history), and at
// saturation beside pgbench's TPC-B-like on the same server.
func benchEvents(stack *devstack.Stack, p devstack.ProjectCredentials, mgmt devstack.ManagementCredentials, srv *pglocal.Server,
	d time.Duration, profile string) (eventsResult, error) {
	var r eventsResult
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	const threads = 32
	l, err := eventsSetup(stack, c, p, mgmt, threads)
	if err != nil {
		return r, err
	}
	l.run(-1, 2*time.Second, threads) // warm up
	// pgbench's tables first, then a CHECKPOINT: the fixed rate is not to
	// pay for the writes of pgbench -i or of the sections before.
	pgb, err := newPgbench(srv, threads)
	if err != nil {
		return r, err
	}
	if err := pgb.checkpoint(); err != nil {
		return r, err
	}
	if err := l.fixed(&r, d, profile); err != nil {
		return r, err
	}
	// Then saturation, alternating with pgbench on the same server.
	r.satRounds, r.pgbRounds, err = pgb.alternate("events at saturation", d, func(_ int, d time.Duration) (float64, error) {
		res := l.run(-1, d, threads)
		r.satErrs += res.ErrorsDurationHistogram.Count
		return res.ActualQPS, nil
	})
	if err != nil {
		return r, err
	}
	r.sat, r.pgbench = mean(r.satRounds), mean(r.pgbRounds)
	return r, drainAccruals(&r, stack)
}

// eventsLoad is what the events section sends: each sender's events, on
// its own customer and card, and the probe's card.
type eventsLoad struct {
	c         client
	senders   []periodic.Runnable
	probeCode string
	pool      *db.Pool
}

// eventsSetup makes the event's schema (through the management API), a
// loyalty campaign whose one FIXED earning rule credits it, a card for
// each of n senders and one for the probe, and waits for the schema to
// reach the regional resolver.
func eventsSetup(stack *devstack.Stack, c client, p devstack.ProjectCredentials, mgmt devstack.ManagementCredentials, n int) (*eventsLoad, error) {
	schema, err := manage(c.hc, stack.RouterURL, mgmt, "/projects/"+p.ProjectID+"/custom-event-schemas", map[string]any{"name": "bench_visit",
		"schema": map[string]any{"properties": map[string]any{"store": map[string]any{"type": "string"}, "spent": map[string]any{"type": "number"}}}})
	if err != nil {
		return nil, err
	}
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench events"})
	if err != nil {
		return nil, err
	}
	campID := camp["id"].(string)
	status, m, err := c.do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "bench_visit",
		"custom_event": map[string]any{"schema_id": schema["id"]}, "loyalty": map[string]any{"type": "FIXED", "points": 1}}})
	if err != nil && status != 200 {
		return nil, fmt.Errorf("earning rule: %d %v %v", status, m, err)
	}
	l := &eventsLoad{c: c, pool: stack.Regional["api"].Pool()}
	for i := range n {
		card, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("visitor-%d", i)}})
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{"event": "bench_visit", "customer": map[string]any{"source_id": fmt.Sprintf("visitor-%d", i)},
			"loyalty": map[string]any{"code": card["code"]}, "metadata": map[string]any{"store": "Oslo", "spent": 12.5}})
		l.senders = append(l.senders, &eventSender{c: c, body: b})
	}
	probe, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": "probe"}})
	if err != nil {
		return nil, err
	}
	l.probeCode = probe["code"].(string)
	// The schema reaches the regional resolver within a poll.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ok, _ := l.senders[0].Run(context.Background(), 0); ok {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("events refused: the schema never reached the service")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run sends events from the first n senders at qps (-1: as fast as they
// go) for d.
func (l *eventsLoad) run(qps float64, d time.Duration, n int) periodic.RunnerResults {
	ro := periodic.RunnerOptions{QPS: qps, Duration: d, NumThreads: n, Percentiles: []float64{50, 99}, Out: io.Discard, Uniform: qps > 0}
	pr := periodic.NewPeriodicRunner(&ro)
	copy(pr.Options().Runners, l.senders[:n])
	return pr.Run()
}

// fixed measures 500 events/s, and meanwhile probes: an
// event, then the card's history polled until its accrual is there.
func (l *eventsLoad) fixed(r *eventsResult, d time.Duration, profile string) error {
	fmt.Fprintln(os.Stderr, "bench: events at 500/s, with accrual probes")
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var lat []float64
	probeErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(probeErr)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ms, err := l.probe()
			if err != nil {
				probeErr <- err
				return
			}
			lat = append(lat, ms)
		}
	}()
	watch := watchDB(l.pool)
	fixed := l.run(500, d, 16)
	watch.end()
	_ = l.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&r.fixedBacklog)
	r.fixedDB = watch.summary(float64(fixed.DurationHistogram.Count), "event")
	fmt.Fprintf(os.Stderr, "bench: events: the database: %s; %d tasks pending\n", r.fixedDB, r.fixedBacklog)
	close(stop)
	if err := <-probeErr; err != nil {
		return err
	}
	r.fixedQPS, r.fixedErrs = fixed.ActualQPS, fixed.ErrorsDurationHistogram.Count
	for _, x := range fixed.DurationHistogram.Percentiles {
		switch x.Percentile {
		case 50:
			r.fixedP50 = x.Value * 1000
		case 99:
			r.fixedP99 = x.Value * 1000
		}
	}
	sort.Float64s(lat)
	r.accrualSamples = len(lat)
	if len(lat) > 0 {
		r.accrualP50, r.accrualP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	}
	// Printed now too: a later phase that fails (pgbench on a busy machine)
	// would take these figures with it.
	fmt.Fprintf(os.Stderr, "bench: events at 500/s: %.0f/s, %d errors, p50 %.2f ms, p99 %.2f ms; accrual p50 %.0f ms, p99 %.0f ms (%d probes)\n",
		r.fixedQPS, r.fixedErrs, r.fixedP50, r.fixedP99, r.accrualP50, r.accrualP99, r.accrualSamples)
	return nil
}

// probe sends the probe's event and polls its card's history until the
// event's accrual is there: the milliseconds that took.
func (l *eventsLoad) probe() (float64, error) {
	c := l.c
	start := time.Now()
	ev, err := c.must("POST", "/v1/events", map[string]any{"event": "bench_visit", "customer": map[string]any{"source_id": "probe"},
		"loyalty": map[string]any{"code": l.probeCode}, "metadata": map[string]any{"store": "Oslo", "spent": 1}})
	if err != nil {
		return 0, err
	}
	for {
		h, err := c.must("GET", "/v1/loyalties/members/"+l.probeCode+"/transactions?order=-id&limit=1", nil)
		if err != nil {
			return 0, err
		}
		if data, _ := h["data"].([]any); len(data) == 1 {
			d, _ := data[0].(map[string]any)["details"].(map[string]any)
			if ce, _ := d["custom_event"].(map[string]any); ce != nil && ce["id"] == ev["id"] {
				return float64(time.Since(start).Microseconds()) / 1000, nil
			}
		}
		if time.Since(start) > 30*time.Second {
			return 0, fmt.Errorf("no accrual of %v within 30 s", ev["id"])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// drainAccruals waits for the accruals the saturated events left behind
// to be done before the next section, whose outbox they would otherwise
// share.
func drainAccruals(r *eventsResult, stack *devstack.Stack) error {
	pending := func() (int, error) {
		var n int
		err := stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&n)
		return n, err
	}
	start := time.Now()
	var err error
	if r.drained, err = pending(); err != nil {
		return err
	}
	for n := r.drained; n > 0; {
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("%d tasks still pending 5 minutes after saturation", n)
		}
		time.Sleep(100 * time.Millisecond)
		if n, err = pending(); err != nil {
			return err
		}
	}
	r.drainSecs = time.Since(start).Seconds()
	return nil
}

func eventsReport(r eventsResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Custom events\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on. "+
		"Each event (a schema of two properties, checked) names its customer by source_id and the card its one FIXED earning rule "+
		"credits, so each makes an accrual in the asynchronous phase. At 500 events/s (16 clients, uniform), a probe sends an event "+
		"every 50 ms and polls its card's history every 5 ms until the event's accrual is there. At saturation, 32 clients on "+
		"their own customers and cards, alternating with pgbench's TPC-B-like (32 clients) on the same server, three rounds of each, "+
		"each after a CHECKPOINT.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| `POST /v1/events` at 500/s (%.0f/s achieved, %d errors) | p50 %.2f ms, p99 %.2f ms |\n", r.fixedQPS, r.fixedErrs,
		r.fixedP50, r.fixedP99)
	fmt.Fprintf(&b, "| event to accrual in the card's history, %d probes | p50 %.0f ms, p99 %.0f ms |\n", r.accrualSamples, r.accrualP50, r.accrualP99)
	fmt.Fprintf(&b, "| the database server during the 500/s phase | %s; %d outbox tasks pending at its end |\n", r.fixedDB, r.fixedBacklog)
	fmt.Fprintf(&b, "| events at saturation, 32 clients | %.0f/s (rounds %s; %d errors) |\n", r.sat, joinRounds(r.satRounds), r.satErrs)
	fmt.Fprintf(&b, "| pgbench TPC-B-like, 32 clients, same server | %.0f tps (rounds %s) |\n", r.pgbench, joinRounds(r.pgbRounds))
	fmt.Fprintf(&b, "| outbox tasks pending when the last round ended (accruals), and the time until all were done | %d, %.1f s |\n", r.drained, r.drainSecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| `POST /v1/events` p99 at 500/s | ≤ 10 ms | %.2f ms | %s |\n", r.fixedP99, verdict(r.fixedP99 <= 10 && r.fixedErrs == 0))
	fmt.Fprintf(&b, "| event to accrual, p99 | ≤ 1 s | %.0f ms | %s |\n", r.accrualP99, verdict(r.accrualP99 <= 1000 && r.accrualSamples >= 50))
	fmt.Fprintf(&b, "| events/s ÷ pgbench tps | ≥ 0.5 | %.2f | %s |\n", r.sat/r.pgbench, verdict(r.sat >= r.pgbench/2 && r.satErrs == 0))
	return b.String()
}
