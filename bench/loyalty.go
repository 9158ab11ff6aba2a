package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

type loyaltyResult struct {
	cards                int
	genSecs              float64
	adds, addP50, addP99 float64
	addErrs              int64
	pgbench              float64
	addRounds            []float64
	pgbenchRounds        []float64
	histTxs              int
	firstP50, firstP99   float64
	deepP50, deepP99     float64
}

// client speaks to the router as a project.
type client struct {
	base string
	p    devstack.ProjectCredentials
	hc   *http.Client
}

// send makes a request as the project, with a body of contentType when
// body is not nil.
func (c client) send(method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, _ := http.NewRequest(method, c.base+path, body)
	req.Host = "api.localhost"
	req.Header.Set("X-App-Id", c.p.AppID)
	req.Header.Set("X-App-Token", c.p.AppToken)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	return c.hc.Do(req)
}

func (c client) do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	res, err := c.send(method, path, rd, "application/json")
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	err = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m, err
}

func (c client) must(method, path string, body any) (map[string]any, error) {
	status, m, err := c.do(method, path, body)
	if err == nil && status != 200 {
		err = fmt.Errorf("%s %s: %d %v", method, path, status, m)
	}
	return m, err
}

// manage makes a call of the management API through the router, as the
// bench's management key: body posted to path as JSON, the answer's
// object, an error unless it is 200.
func manage(hc *http.Client, routerURL string, mgmt devstack.ManagementCredentials, path string, body any) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", routerURL+"/management/v1"+path, bytes.NewReader(b))
	req.Host = "api.localhost"
	req.Header.Set("X-Management-Id", mgmt.ID)
	req.Header.Set("X-Management-Token", mgmt.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 200 {
		return nil, fmt.Errorf("POST /management/v1%s: %d %v %v", path, res.StatusCode, m, err)
	}
	return m, nil
}

// adder is one load-generation thread: it adds a point to its own card.
type adder struct {
	c    client
	code string
}

func (a *adder) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	status, _, err := a.c.do("POST", "/v1/loyalties/members/"+a.code+"/balance", map[string]any{"points": 1})
	return err == nil && status == 200, ""
}

// benchLoyalty measures the ledger; a CPU profile of the additions is
// written to profile when it is not empty.
func benchLoyalty(stack *devstack.Stack, p devstack.ProjectCredentials, db *pglocal.Server, d time.Duration, profile string) (loyaltyResult, error) {
	var r loyaltyResult
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if err := loyaltyCards(&r, c); err != nil {
		return r, err
	}
	if err := loyaltyAdds(&r, c, db, d, profile); err != nil {
		return r, err
	}
	return r, loyaltyHistory(&r, c, stack, p, d)
}

// loyaltyCards times the generation of a campaign with 100,000 cards.
func loyaltyCards(r *loyaltyResult, c client) error {
	const cards = 100000
	fmt.Fprintln(os.Stderr, "bench: a loyalty campaign with 100,000 cards")
	start := time.Now()
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench 100k", "vouchers_count": cards})
	if err != nil {
		return err
	}
	actionID, _ := camp["async_action_id"].(string)
	if _, err := c.await(actionID, 5*time.Minute); err != nil {
		return fmt.Errorf("card generation: %w", err)
	}
	r.cards, r.genSecs = cards, time.Since(start).Seconds()
	return nil
}

// loyaltyAdds measures point additions, 32 clients on distinct cards,
// then pgbench on the same server.
func loyaltyAdds(r *loyaltyResult, c client, db *pglocal.Server, d time.Duration, profile string) error {
	fmt.Fprintln(os.Stderr, "bench: point additions, 32 clients")
	addCamp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench adds"})
	if err != nil {
		return err
	}
	const threads = 32
	var adders []periodic.Runnable
	for i := 0; i < threads; i++ {
		m, err := c.must("POST", "/v1/loyalties/"+addCamp["id"].(string)+"/members",
			map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("adder-%d", i)}})
		if err != nil {
			return err
		}
		adders = append(adders, &adder{c: c, code: m["code"].(string)})
	}
	runAdders := func(d time.Duration) periodic.RunnerResults {
		// As fhttp does: the runner takes the options over, and its
		// threads' Runnables are set on the runner's own copy.
		ro := periodic.RunnerOptions{QPS: -1, Duration: d, NumThreads: threads, Percentiles: []float64{50, 99}, Out: io.Discard}
		pr := periodic.NewPeriodicRunner(&ro)
		copy(pr.Options().Runners, adders)
		return pr.Run()
	}
	// pgbench's tables are made first, so that neither side runs while the
	// other's initial writes are being checkpointed; then three rounds of
	// each, alternating, each after a CHECKPOINT, so that a drift in the
	// machine's speed during the run falls on both alike.
	fmt.Fprintln(os.Stderr, "bench: pgbench -i, scale 32")
	pgb, err := newPgbench(db, threads)
	if err != nil {
		return err
	}
	runAdders(2 * time.Second) // warm up
	var durs []float64
	adds, tps, err := pgb.alternate("point additions", d, func(i int, d time.Duration) (float64, error) {
		if profile != "" && i == 0 {
			f, err := os.Create(profile)
			if err != nil {
				return 0, err
			}
			_ = pprof.StartCPUProfile(f)
		}
		res := runAdders(d)
		pprof.StopCPUProfile()
		r.addErrs += res.ErrorsDurationHistogram.Count
		for _, x := range res.DurationHistogram.Percentiles {
			switch x.Percentile {
			case 50:
				durs = append(durs, x.Value*1000)
			case 99:
				r.addP99 = max(r.addP99, x.Value*1000)
			}
		}
		return res.ActualQPS, nil
	})
	if err != nil {
		return err
	}
	r.adds, r.pgbench = mean(adds), mean(tps)
	r.addP50 = mean(durs)
	r.addRounds, r.pgbenchRounds = adds, tps
	return nil
}

// loyaltyHistory measures the history of a card with 10,000
// transactions: its first page, and a page 9,000 entries in.
func loyaltyHistory(r *loyaltyResult, c client, stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration) error {
	const histTxs = 10000
	fmt.Fprintln(os.Stderr, "bench: a card with 10,000 transactions")
	histCamp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench history"})
	if err != nil {
		return err
	}
	m, err := c.must("POST", "/v1/loyalties/"+histCamp["id"].(string)+"/members",
		map[string]any{"customer": map[string]any{"source_id": "historian"}})
	if err != nil {
		return err
	}
	code := m["code"].(string)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < histTxs/8; i++ {
				if _, err := c.must("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	r.histTxs = histTxs
	path := "/v1/loyalties/members/" + code + "/transactions"
	// The cursor 9,000 entries in: walk there by pages.
	after := ""
	for i := 0; i < 90; i++ {
		deep, err := c.must("GET", path+"?limit=100&order=id&starting_after_id="+after, nil)
		if err != nil {
			return err
		}
		after, _ = deep["more_starting_after"].(string)
	}
	hdr := []string{"Host: api.localhost", "X-App-Id: " + p.AppID, "X-App-Token: " + p.AppToken}
	first, err := load(stack.RouterURL+path, hdr, 200, d, 8)
	if err != nil {
		return err
	}
	deepRes, err := load(stack.RouterURL+path+"?order=id&starting_after_id="+after, hdr, 200, d, 8)
	if err != nil {
		return err
	}
	r.firstP50, r.firstP99 = pct(first, 50), pct(first, 99)
	r.deepP50, r.deepP99 = pct(deepRes, 50), pct(deepRes, 99)
	return nil
}

// pgbencher runs pgbench's TPC-B-like script on a database of its own on
// a server.
type pgbencher struct {
	bin     string
	args    []string
	clients int
}

// newPgbench creates and fills pgbench's database (scale = clients) on s.
func newPgbench(s *pglocal.Server, clients int) (*pgbencher, error) {
	ctx := context.Background()
	if err := s.CreateDatabase(ctx, "pgbench"); err != nil {
		return nil, err
	}
	bin, err := pglocal.Find()
	if err != nil {
		return nil, err
	}
	p := &pgbencher{bin: bin, args: []string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", pglocal.User}, clients: clients}
	initCmd := exec.Command(filepath.Join(bin, "pgbench"), append(p.args, "-i", "-q", "-s", strconv.Itoa(clients), "pgbench")...)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgbench -i: %v\n%s", err, out)
	}
	return p, nil
}

// checkpoint flushes the server's dirty pages, so that the next measure
// does not pay for the last one's writes.
func (p *pgbencher) checkpoint() error {
	out, err := exec.Command(filepath.Join(p.bin, "psql"), append(p.args, "-X", "-q", "-c", "CHECKPOINT", "pgbench")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("checkpoint: %v\n%s", err, out)
	}
	return nil
}

// run runs pgbench for d and returns its transactions per second.
func (p *pgbencher) run(d time.Duration) (float64, error) {
	secs := max(1, int(d.Round(time.Second).Seconds()))
	out, err := exec.Command(filepath.Join(p.bin, "pgbench"), append(p.args, "-n", "-M", "prepared", "-c", strconv.Itoa(p.clients),
		"-j", "2", "-T", strconv.Itoa(secs), "pgbench")...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench: no tps in\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// alternate runs rounds of a load at saturation and of pgbench, one after
// the other, each after a CHECKPOINT, so that a drift in the machine's
// speed during the run falls on both alike. load runs round i for d and
// returns its requests per second; what names it in the progress lines.
func (p *pgbencher) alternate(what string, d time.Duration, load func(i int, d time.Duration) (float64, error)) (loads, tps []float64, err error) {
	for i := range rounds {
		fmt.Fprintf(os.Stderr, "bench: round %d: %s, then pgbench TPC-B-like, %d clients each\n", i+1, what, p.clients)
		if err := p.checkpoint(); err != nil {
			return nil, nil, err
		}
		qps, err := load(i, d/rounds)
		if err != nil {
			return nil, nil, err
		}
		loads = append(loads, qps)
		if err := p.checkpoint(); err != nil {
			return nil, nil, err
		}
		t, err := p.run(d / rounds)
		if err != nil {
			return nil, nil, err
		}
		tps = append(tps, t)
	}
	return loads, tps, nil
}

func mean(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func joinRounds(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, ", ")
}

func loyaltyReport(r loyaltyResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Loyalty ledger\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on; "+
		"pgbench on the same PostgreSQL server as the regional database, in the same run: three rounds of each, alternating, "+
		"each after a CHECKPOINT; the figures are the means of the rounds.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| campaign with %d cards, POST to async action DONE | %.2f s |\n", r.cards, r.genSecs)
	fmt.Fprintf(&b, "| point additions, 32 clients on distinct cards | %.0f/s (rounds %s; p50 %.2f ms, worst p99 %.2f ms, %d errors) |\n",
		r.adds, joinRounds(r.addRounds), r.addP50, r.addP99, r.addErrs)
	fmt.Fprintf(&b, "| pgbench TPC-B-like, 32 clients, same server | %.0f tps (rounds %s) |\n", r.pgbench, joinRounds(r.pgbenchRounds))
	fmt.Fprintf(&b, "| history of a card with %d transactions, first page, 200 rps | p50 %.2f ms, p99 %.2f ms |\n", r.histTxs, r.firstP50, r.firstP99)
	fmt.Fprintf(&b, "| same card, a page 9,000 entries deep, 200 rps | p50 %.2f ms, p99 %.2f ms |\n", r.deepP50, r.deepP99)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 100,000 cards generated | ≤ 6 s | %.2f s | %s |\n", r.genSecs, verdict(r.genSecs <= 6))
	fmt.Fprintf(&b, "| point additions vs pgbench | ≥ 50 %% | %.0f %% | %s |\n", 100*r.adds/r.pgbench, verdict(r.adds >= r.pgbench/2))
	fmt.Fprintf(&b, "| history p50 / p99, first page | ≤ 3 ms / ≤ 10 ms | %.2f / %.2f ms | %s |\n", r.firstP50, r.firstP99,
		verdict(r.firstP50 <= 3 && r.firstP99 <= 10))
	fmt.Fprintf(&b, "| history p50 / p99, deep page | as the first | %.2f / %.2f ms | %s |\n", r.deepP50, r.deepP99,
		verdict(r.deepP50 <= 3 && r.deepP99 <= 10))
	return b.String()
}
