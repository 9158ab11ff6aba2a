package main

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/webhooks"
)

// hookReceiver is a local webhook receiver that notes when each event arrived.
type hookReceiver struct {
	mu       sync.Mutex
	lags     []time.Duration // receipt minus the event's created_at
	received []time.Time
	seen     map[[16]byte]bool // webhook-ids received, by digest: a fixed-size key holds no string of its own
	types    map[string]int    // deliveries by event type
	url      string
	srv      *http.Server
}

func startReceiver() (*hookReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &hookReceiver{seen: map[[16]byte]bool{}, types: map[string]int{}, url: "http://" + l.Addr().String() + "/hooks"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		b, _ := io.ReadAll(req.Body)
		var ev struct {
			CreatedAt time.Time `json:"created_at"`
			Type      string    `json:"type"`
		}
		_ = json.Unmarshal(b, &ev)
		r.mu.Lock()
		if id := md5.Sum([]byte(req.Header.Get("webhook-id"))); !r.seen[id] {
			r.seen[id] = true
			r.lags = append(r.lags, now.Sub(ev.CreatedAt))
			r.received = append(r.received, now)
			r.types[ev.Type]++
		}
		r.mu.Unlock()
	})}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// expect sizes the receiver for n more deliveries, so that what it
// notes of them takes no memory as they arrive: the mixed day measures
// the memory of the process the receiver shares with the platform, and
// a receiver growing by its notes of 27,000 deliveries (~3 MB live, five
// times that in heap at GOGC 400) read as the platform's growth.
func (r *hookReceiver) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[[16]byte]bool, len(r.seen)+n)
	maps.Copy(seen, r.seen)
	r.seen = seen
	r.lags = slices.Grow(r.lags, n)
	r.received = slices.Grow(r.received, n)
}

func (r *hookReceiver) reset() {
	r.mu.Lock()
	r.lags, r.received = nil, nil
	r.mu.Unlock()
}

func (r *hookReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.received)
}

// awaitTypes waits up to limit for want's deliveries of each type, and
// answers those of every type that arrived.
func (r *hookReceiver) awaitTypes(want map[string]int64, limit time.Duration) map[string]int {
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		r.mu.Lock()
		done := true
		for t, n := range want {
			done = done && int64(r.types[t]) >= n
		}
		got := maps.Clone(r.types)
		r.mu.Unlock()
		if done || time.Now().After(deadline) {
			return got
		}
	}
}

// lastAt is when the latest delivery arrived.
func (r *hookReceiver) lastAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.received) == 0 {
		return time.Time{}
	}
	return r.received[len(r.received)-1]
}

type webhookResult struct {
	events             int
	rate               float64
	p50, p99, max      time.Duration
	burst              int
	burstSecs, perSec  float64
	enqueueSecs        float64
	burstSent, burstOK int
}

// benchWebhooks measures commit-to-receipt lag at a steady 200 events per
// second (customers created through the router), then how many deliveries a
// second one regional instance sustains when a backlog of events is waiting.
func benchWebhooks(stack *devstack.Stack, p devstack.ProjectCredentials, mgmt devstack.ManagementCredentials, d time.Duration) (webhookResult, error) {
	var res webhookResult
	rcv, err := startReceiver()
	if err != nil {
		return res, err
	}
	defer rcv.srv.Close()
	if _, err := manage(http.DefaultClient, stack.RouterURL, mgmt, "/projects/"+p.ProjectID+"/webhooks",
		map[string]any{"target_url": rcv.url, "events": []string{"customer.created"}}); err != nil {
		return res, err
	}
	time.Sleep(time.Second) // the regional directory cache learns of the webhook
	if err := webhooksLag(&res, rcv, stack, p, d); err != nil {
		return res, err
	}
	return res, webhooksBacklog(&res, rcv, stack, p)
}

// webhooksLag measures the lag of deliveries at 200 events per second.
func webhooksLag(r *webhookResult, rcv *hookReceiver, stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration) error {
	fmt.Fprintln(os.Stderr, "bench: webhooks at 200 events/s")
	o := fhttp.HTTPRunnerOptions{RunnerOptions: periodic.RunnerOptions{QPS: 200, Duration: d, NumThreads: 8, Out: io.Discard, Uniform: true}}
	o.URL = stack.RouterURL + "/v1/customers"
	o.Payload = []byte(`{"name":"Lag Test","metadata":{"bench":true}}`)
	o.ContentType = "application/json"
	for _, h := range []string{"Host: api.localhost", "X-App-Id: " + p.AppID, "X-App-Token: " + p.AppToken} {
		if err := o.AddAndValidateExtraHeader(h); err != nil {
			return err
		}
	}
	run, err := fhttp.RunHTTPTest(&o)
	if err != nil {
		return err
	}
	sent := int(run.RetCodes[200])
	deadline := time.Now().Add(30 * time.Second)
	for rcv.count() < sent && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	rcv.mu.Lock()
	lags := append([]time.Duration(nil), rcv.lags...)
	rcv.mu.Unlock()
	if len(lags) < sent {
		return fmt.Errorf("webhooks: %d of %d events arrived", len(lags), sent)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	r.events, r.rate = sent, run.ActualQPS
	r.p50, r.p99, r.max = lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1]
	return nil
}

// webhooksBacklog measures sustained deliveries: a backlog of events
// written at once.
func webhooksBacklog(r *webhookResult, rcv *hookReceiver, stack *devstack.Stack, p devstack.ProjectCredentials) error {
	const burst = 40000
	fmt.Fprintf(os.Stderr, "bench: webhooks, backlog of %d events\n", burst)
	rcv.reset()
	pool := stack.Regional["api"].Pool()
	ctx := context.Background()
	start := time.Now()
	if err := writeBacklog(ctx, stack, p.ProjectID, burst); err != nil {
		return err
	}
	r.enqueueSecs = time.Since(start).Seconds()
	fmt.Fprint(os.Stderr, "backlog written: ", serverActivity(ctx, pool), explainClaim(ctx, pool), explainFinish(ctx, pool))
	stopWatch := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
				fmt.Fprintf(os.Stderr, "backlog: %d delivered; %s", rcv.count(), serverActivity(ctx, pool))
			}
		}
	}()
	defer close(stopWatch)
	retries0 := db.Retries.Load()
	defer func() {
		fmt.Fprintf(os.Stderr, "transaction retries during the backlog: %d\n", db.Retries.Load()-retries0)
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for rcv.count() < burst && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	rcv.mu.Lock()
	got := rcv.received
	rcv.mu.Unlock()
	if len(got) < burst {
		return fmt.Errorf("webhooks: %d of %d backlog events arrived in 5 minutes", len(got), burst)
	}
	r.burst = burst
	r.burstSecs = got[len(got)-1].Sub(start).Seconds()
	r.perSec = float64(burst) / r.burstSecs
	return nil
}

// writeBacklog writes n customer.created events of projectID. Eight
// writers, so that writing outpaces delivering and the figure is the
// workers' rate, not the writer's.
func writeBacklog(ctx context.Context, stack *devstack.Stack, projectID string, n int) error {
	pool := stack.Regional["api"].Pool()
	hooks := stack.Regional["api"].Webhooks()
	const writers, perTx = 8, 500
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w * perTx; i < n; i += writers * perTx {
				err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
					for j := i; j < i+perTx; j++ {
						if err := hooks.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: "customer.created", Entity: fmt.Sprintf("cust_bench%d", j),
							Object: map[string]any{"id": fmt.Sprintf("cust_bench%d", j), "object": "customer"}}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func webhookReport(r webhookResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Webhook delivery\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s with the same platform as above (one regional instance, its workers at "+
		"their defaults: 64 tasks claimed at once, 64 run at once) and an in-process receiver on loopback. "+
		"Lag is receipt time minus the event's `created_at`, which is taken inside the writing transaction, so it "+
		"slightly overstates commit-to-receipt.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| events at a steady rate (customers created through the router) | %d at %.0f/s |\n", r.events, r.rate)
	fmt.Fprintf(&b, "| lag p50 / p99 / max | %.0f ms / %.0f ms / %.0f ms |\n", ms(r.p50), ms(r.p99), ms(r.max))
	fmt.Fprintf(&b, "| backlog delivered | %d events in %.1f s (written in %.1f s) |\n", r.burst, r.burstSecs, r.enqueueSecs)
	fmt.Fprintf(&b, "| sustained deliveries | %.0f per second |\n", r.perSec)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| lag p99 at 200 events/s | ≤ 1 s | %.0f ms | %s |\n", ms(r.p99), verdict(r.p99 <= time.Second))
	fmt.Fprintf(&b, "| sustained deliveries | ≥ 1,000/s | %.0f/s | %s |\n", r.perSec, verdict(r.perSec >= 1000))
	return b.String()
}

// verdict is a goal's cell in a report.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
