package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
)

// The engine part of the scale section: qualifications and a stack of 30
// redeemables against a project of 100, 1,000 and 10,000 PROMOTION
// campaigns of a tier each, each tier with a validation rule of its own.
// The rules are a mix (amount thresholds, products, order metadata,
// segments, customer metadata, dates) under which the same four tiers
// apply to the measured request whatever the size: the rest must be
// pruned or refused, and what grows with the project is only that.

// scaleEngineSizes are the passes' sizes; the project grows from one to
// the next.
var scaleEngineSizes = []int{100, 1_000, 10_000}

func setScaleEngineSizes(s string) error {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			return fmt.Errorf("scale-engine-sizes: %q is not a size of at least 10", f)
		}
		sizes = append(sizes, n)
	}
	scaleEngineSizes = sizes
	return nil
}

// scaleApplying are the tiers (by index) the measured order and customer
// meet: a product of the order (1, 7), its channel (2), the customer's
// tier (4); see scaleRule.
var scaleApplying = []int{1, 2, 4, 7}

const (
	scaleWallet   = 100 // the customer's vouchers
	scaleStack    = 30  // the validation's redeemables, the stack's maximum
	scaleSegments = 50  // static segments, the customer in one
)

type scalePass struct {
	size               int
	built              time.Duration
	all, wallet, stack scaleMeasure
}

type scaleMeasure struct {
	p50, p95, qps float64
	errs          int64
	cpu           cpuShare // from the phase's CPU profile
}

type scaleEngineResult struct {
	passes []scalePass
}

// scaleRule is tier i's validation rule.
func scaleRule(i int, segments []string) map[string]any {
	cond := func(name string, op string, v ...any) map[string]any {
		return map[string]any{"name": name, "conditions": map[string]any{op: v}}
	}
	one := func(c map[string]any) map[string]any { return map[string]any{"1": c, "logic": "1"} }
	switch i % 6 {
	case 0:
		return one(cond("order.amount", "$more_than", 1_000_000+i))
	case 1:
		return one(cond("order.items.any", "$in", map[string]any{"object": "product", "id": fmt.Sprintf("prod_scale_%d", i)}))
	case 2:
		return one(cond("order.metadata.channel", "$is", fmt.Sprintf("ch_%d", i)))
	case 3:
		return map[string]any{"1": cond("customer.segment", "$in", segments[i%len(segments)]),
			"2": cond("order.metadata.channel", "$is", fmt.Sprintf("ch_%d", i)), "logic": "1 and 2"}
	case 4:
		return one(cond("customer.metadata.tier", "$is", fmt.Sprintf("t_%d", i)))
	}
	if i%12 == 5 {
		return one(cond("date", "$after", "2999-01-01T00:00:00Z")) // not started
	}
	return one(cond("date", "$before", "2020-01-01T00:00:00Z")) // over
}

// scaleEngine measures the engine's calls at each size, growing the
// project between passes.
func scaleEngine(ctx context.Context, stack *devstack.Stack, d time.Duration, profile string) (scaleEngineResult, error) {
	var r scaleEngineResult
	p, err := stack.CreateProject(ctx, "Scale engine", "api", "bench")
	if err != nil {
		return r, err
	}
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	f := &scaleFixture{c: c}
	t0 := time.Now()
	if err := f.setup(); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "bench: scale: engine: wallet and segments in %s\n", time.Since(t0).Round(time.Millisecond))
	for k, size := range scaleEngineSizes {
		t0 := time.Now()
		if err := f.grow(size); err != nil {
			return r, err
		}
		pass := scalePass{size: size, built: time.Since(t0)}
		fmt.Fprintf(os.Stderr, "bench: scale: engine: %d campaigns and tiers in %s\n", size, pass.built.Round(time.Millisecond))
		prof := ""
		if k == 0 {
			prof = profile // CPU per qualification is asked at 100 campaigns
		}
		if err := f.measure(&pass, d, prof); err != nil {
			return r, err
		}
		r.passes = append(r.passes, pass)
	}
	return r, nil
}

// scaleFixture is the growing project: its customer's wallet, segments
// and the tiers made so far.
type scaleFixture struct {
	c        client
	codes    []string // the wallet's
	segments []string
	tiers    int
	tierIDs  map[int]string // of scaleApplying
	mu       sync.Mutex
}

// setup makes the segments (the customer in one), the customer and a
// wallet of scaleWallet vouchers published to it.
func (f *scaleFixture) setup() error {
	c := f.c
	if _, err := c.must("POST", "/v1/customers", map[string]any{"source_id": "scale-wallet", "metadata": map[string]any{"tier": "t_4"}}); err != nil {
		return err
	}
	if _, err := c.must("POST", "/v1/customers", map[string]any{"source_id": "scale-other"}); err != nil {
		return err
	}
	for k := 0; k < scaleSegments; k++ {
		member := "scale-other"
		if k == 3 {
			member = "scale-wallet"
		}
		s, err := c.must("POST", "/v1/segments", map[string]any{"name": fmt.Sprintf("Scale %d", k), "type": "static",
			"customers": []any{member}})
		if err != nil {
			return err
		}
		f.segments = append(f.segments, s["id"].(string))
	}
	// Standalone vouchers, made one by one: each its own creation time,
	// which qualifications page by.
	f.tierIDs = map[int]string{}
	return parallel(4, scaleWallet, func(i int) error {
		code := fmt.Sprintf("SCALE-W-%03d", i)
		if _, err := c.must("POST", "/v1/vouchers/"+code, map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i}}); err != nil {
			return err
		}
		_, err := c.must("POST", "/v1/publications", map[string]any{"voucher": code, "customer": map[string]any{"source_id": "scale-wallet"}})
		if err == nil {
			f.mu.Lock()
			f.codes = append(f.codes, code)
			f.mu.Unlock()
		}
		return err
	})
}

// grow makes the tiers up to size: each a validation rule and a
// PROMOTION campaign of one tier under it, through the API on eight
// workers (rows exactly as the service writes them).
func (f *scaleFixture) grow(size int) error {
	from := f.tiers
	err := parallel(8, size-from, func(k int) error {
		i := from + k
		rule, err := f.c.must("POST", "/v1/validation-rules", map[string]any{"name": fmt.Sprintf("Scale rule %05d", i),
			"type": "advanced", "rules": scaleRule(i, f.segments)})
		if err != nil {
			return err
		}
		tier := map[string]any{"name": fmt.Sprintf("Scale tier %05d", i), "validation_rules": []any{rule["id"]},
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i%500}}}
		camp, err := f.c.must("POST", "/v1/campaigns", map[string]any{"name": fmt.Sprintf("Scale promotion %05d", i),
			"campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{tier}}})
		if err != nil {
			return err
		}
		for _, a := range scaleApplying {
			if a == i {
				f.mu.Lock()
				f.tierIDs[i] = camp["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"].(string)
				f.mu.Unlock()
			}
		}
		return nil
	})
	f.tiers = size
	return err
}

// parallel runs do(0..n-1) on w workers, stopping at the first error.
func parallel(w, n int, do func(int) error) error {
	jobs := make(chan int)
	var first atomic.Value
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if first.Load() != nil {
					continue
				}
				if err := do(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// order is the measured order: the products of tiers 1 and 7, others,
// channel ch_2, 200.00.
func scaleOrder() map[string]any {
	items := []any{}
	for _, p := range []string{"prod_scale_1", "prod_scale_7", "prod_other_a", "prod_other_b"} {
		items = append(items, map[string]any{"product_id": p, "quantity": 1, "price": 5000})
	}
	return map[string]any{"items": items, "metadata": map[string]any{"channel": "ch_2"}}
}

// measure runs the pass's three calls at 100/s, each answer checked.
func (f *scaleFixture) measure(pass *scalePass, d time.Duration, profile string) error {
	qual := func(scenario string) func() map[string]any {
		return func() map[string]any {
			return map[string]any{"customer": map[string]any{"source_id": "scale-wallet"}, "order": scaleOrder(),
				"scenario": scenario, "options": map[string]any{"limit": 50}}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: scale: engine: %d: qualifications (ALL) at 100/s\n", pass.size)
	var err error
	// The profile file, when asked, is the ALL phase's at the first size.
	pass.all, err = f.at100(qual("ALL"), "/v1/qualifications", f.checkQualification(scaleWallet+len(scaleApplying)), d, profile)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: scale: engine: %d: CPU per qualification: %s\n", pass.size, pass.all.cpu)
	fmt.Fprintf(os.Stderr, "bench: scale: engine: %d: qualifications (CUSTOMER_WALLET) at 100/s\n", pass.size)
	if pass.wallet, err = f.at100(qual("CUSTOMER_WALLET"), "/v1/qualifications", f.checkQualification(scaleWallet), d, ""); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: scale: engine: %d: validation of %d redeemables at 100/s\n", pass.size, scaleStack)
	stack := func() map[string]any {
		var rs []any
		for _, code := range f.codes[:scaleStack-len(scaleApplying)] {
			rs = append(rs, map[string]any{"object": "voucher", "id": code})
		}
		for _, i := range scaleApplying {
			rs = append(rs, map[string]any{"object": "promotion_tier", "id": f.tierIDs[i]})
		}
		return map[string]any{"customer": map[string]any{"source_id": "scale-wallet"}, "order": scaleOrder(), "redeemables": rs}
	}
	pass.stack, err = f.at100(stack, "/v1/validations", checkValidation, d, "")
	return err
}

// at100 runs body() to path at an even 100/s on 16 clients after a 2 s
// warm-up, its CPU per call from a profile (written to file too when one
// is named); a wrong answer is an error.
func (f *scaleFixture) at100(body func() map[string]any, path string, check func([]byte) error, d time.Duration, file string) (scaleMeasure, error) {
	var errs atomic.Int64
	var wrong atomic.Value
	runners := make([]periodic.Runnable, 16)
	for i := range runners {
		runners[i] = &scaleCall{c: f.c, path: path, body: body, check: check, errs: &errs, wrong: &wrong}
	}
	res, cpu, err := atRateCPU(100, runners, d, file)
	m := scaleMeasure{qps: res.ActualQPS, errs: errs.Load(), cpu: cpu}
	m.p50, m.p95, _ = percentiles(res)
	if err, _ := wrong.Load().(error); err != nil {
		return m, err
	}
	return m, err
}

// scaleCall is one load thread of a pass; it checks each answer.
type scaleCall struct {
	c     client
	path  string
	body  func() map[string]any
	check func([]byte) error
	errs  *atomic.Int64
	wrong *atomic.Value
}

func (s *scaleCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	b, _ := json.Marshal(s.body())
	res, err := s.c.send("POST", s.path, bytes.NewReader(b), "application/json")
	if err != nil {
		s.errs.Add(1)
		return false, ""
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != 200 {
		err = fmt.Errorf("%s: %d %s", s.path, res.StatusCode, body)
	}
	if err == nil {
		err = s.check(body)
	}
	if err != nil {
		s.errs.Add(1)
		s.wrong.CompareAndSwap(nil, err)
		return false, ""
	}
	return true, ""
}

// checkQualification wants total redeemables, the applying tiers among
// them when more than the wallet.
func (f *scaleFixture) checkQualification(total int) func([]byte) error {
	return func(b []byte) error {
		var a struct {
			Redeemables struct {
				Total int `json:"total"`
				Data  []struct {
					ID     string `json:"id"`
					Object string `json:"object"`
				} `json:"data"`
			} `json:"redeemables"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		if a.Redeemables.Total != total || len(a.Redeemables.Data) != 50 {
			return fmt.Errorf("qualification: %d redeemables (%d on the page), want %d (50)", a.Redeemables.Total, len(a.Redeemables.Data), total)
		}
		tiers := 0
		for _, d := range a.Redeemables.Data {
			if d.Object == "promotion_tier" {
				tiers++
			}
		}
		if want := total - scaleWallet; tiers != want { // the tiers are newer than the wallet: on the first page
			return fmt.Errorf("qualification: %d tiers on the page, want %d", tiers, want)
		}
		return nil
	}
}

// checkValidation wants a valid answer of scaleStack redeemables.
func checkValidation(b []byte) error {
	var a struct {
		Valid       bool `json:"valid"`
		Redeemables []struct {
			Status string `json:"status"`
		} `json:"redeemables"`
		Skipped []any `json:"skipped_redeemables"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if !a.Valid || len(a.Redeemables) != scaleStack { // the skipped among them
		return fmt.Errorf("validation: valid %v, %d redeemables and %d skipped, want %d: %.300s", a.Valid, len(a.Redeemables), len(a.Skipped),
			scaleStack, b)
	}
	return nil
}

func scaleEngineReport(r scaleEngineResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### The engine at scale\n\n")
	fmt.Fprintf(&b, "A project of PROMOTION campaigns of one tier each, each tier with a validation rule of its own (a sixth each: "+
		"an order amount threshold, a product, the order's channel, a segment and the channel, the customer's metadata, a date), "+
		"grown from %d to %d; four tiers apply to the request. A customer in one of %d static segments holds %d vouchers. "+
		"Qualifications ask for 50 a page with a four-line order; the validation stacks %d redeemables (%d of the vouchers and the "+
		"four tiers). 16 clients at an even 100/s after a 2 s warm-up; every answer is checked (the totals, the tiers, the stack). "+
		"CPU per request is from a CPU profile of each phase, its samples summed by the server that ran them (see cpushare.go): "+
		"the platform's is the router's and the regional service's, without the load generator, the garbage collector's background "+
		"workers and the runtime, which the whole process's adds.\n\n",
		scaleEngineSizes[0], scaleEngineSizes[len(scaleEngineSizes)-1], scaleSegments, scaleWallet, scaleStack, scaleStack-len(scaleApplying))
	fmt.Fprintf(&b, "| campaigns and tiers | built in | qualifications ALL p50 / p95 | CUSTOMER_WALLET p50 / p95 | validation of %d p50 / p95 "+
		"| CPU per qualification ALL: regional / router / platform / whole process | CPU per validation: the same |\n|---|---|---|---|---|---|---|\n", scaleStack)
	for _, p := range r.passes {
		fmt.Fprintf(&b, "| %d | %s | %.2f / %.2f ms (%.0f/s, %d errors) | %.2f / %.2f ms (%d errors) | %.2f / %.2f ms (%d errors) | %s | %s |\n",
			p.size, p.built.Round(time.Second), p.all.p50, p.all.p95, p.all.qps, p.all.errs, p.wallet.p50, p.wallet.p95, p.wallet.errs,
			p.stack.p50, p.stack.p95, p.stack.errs, cpuCells(p.all.cpu), cpuCells(p.stack.cpu))
	}
	if len(r.passes) == 0 {
		return b.String()
	}
	first, last := r.passes[0], r.passes[len(r.passes)-1]
	growth := last.all.p50 / first.all.p50
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| qualifications at %d, p50 / p95 | ≤ 10 / 30 ms | %.2f / %.2f ms | %s |\n", last.size, last.all.p50, last.all.p95,
		verdict(last.all.p50 <= 10 && last.all.p95 <= 30 && last.all.errs == 0))
	fmt.Fprintf(&b, "| qualifications' growth, p50 at %d ÷ at %d | ≤ 3× | %.2f× (CUSTOMER_WALLET %.2f×) | %s |\n", last.size, first.size,
		growth, last.wallet.p50/first.wallet.p50, verdict(growth <= 3))
	fmt.Fprintf(&b, "| validation of %d redeemables at %d, p50 / p95 | ≤ 10 / 25 ms | %.2f / %.2f ms | %s |\n", scaleStack, last.size,
		last.stack.p50, last.stack.p95, verdict(last.stack.p50 <= 10 && last.stack.p95 <= 25 && last.stack.errs == 0))
	fmt.Fprintf(&b, "| CPU per qualification (ALL, %d campaigns), the platform's (router and regional service) | ≤ 2.5 ms | %.2f ms "+
		"(whole process %.2f) | %s |\n", first.size, first.all.cpu.service(), first.all.cpu.whole(), verdict(first.all.cpu.service() <= 2.5))
	return b.String()
}

// cpuCells is a phase's CPU per call for a table's cell.
func cpuCells(c cpuShare) string {
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f ms", c.regional, c.router, c.service(), c.whole())
}
