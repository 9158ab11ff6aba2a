package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func load(url string, headers []string, qps float64, d time.Duration, threads int) (*fhttp.HTTPRunnerResults, error) {
	return loadAs("GET", http.StatusOK, url, headers, qps, d, threads)
}

// loadAs is load for requests of method whose success is status.
func loadAs(method string, status int, url string, headers []string, qps float64, d time.Duration, threads int) (*fhttp.HTTPRunnerResults, error) {
	// Uniform spreads the threads' requests evenly over time: an open-loop
	// fixed rate rather than every thread firing in the same instant.
	o := fhttp.HTTPRunnerOptions{RunnerOptions: periodic.RunnerOptions{QPS: qps, Duration: d, NumThreads: threads,
		Percentiles: []float64{50, 99}, Out: io.Discard, Uniform: qps > 0}}
	if qps == 0 {
		o.QPS = -1 // as fast as possible
	}
	o.URL, o.MethodOverride = url, method
	for _, h := range headers {
		if err := o.AddAndValidateExtraHeader(h); err != nil {
			return nil, err
		}
	}
	res, err := fhttp.RunHTTPTest(&o)
	if err != nil {
		return nil, err
	}
	if res.RetCodes[status] == 0 {
		return nil, fmt.Errorf("%s %s: no successful request: %v", method, url, res.RetCodes)
	}
	return res, nil
}

func pct(r *fhttp.HTTPRunnerResults, p float64) float64 {
	for _, x := range r.DurationHistogram.Percentiles {
		if x.Percentile == p {
			return x.Value * 1000
		}
	}
	return -1
}

func errorsOf(r *fhttp.HTTPRunnerResults) int64 {
	var n int64
	for code, c := range r.RetCodes {
		if code != http.StatusOK {
			n += c
		}
	}
	return n
}

type ratios struct {
	each      []float64 // pass by pass
	median    float64
	low, high float64 // an interval for the median
	coverage  float64 // the chance the interval holds the true median
}

// pairedRatios pairs a's rounds with b's pass by pass. The interval is the
// widest-inside one of order statistics (x(k), x(n+1-k)) that covers the
// median with a chance of at least 85 % (the sign test's, no assumption
// of the ratios' distribution).
func pairedRatios(a, b []float64) ratios {
	var r ratios
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r.each = append(r.each, a[i]/b[i])
		}
	}
	n := len(r.each)
	if n == 0 {
		return r
	}
	sorted := slices.Clone(r.each)
	sort.Float64s(sorted)
	if n%2 == 1 {
		r.median = sorted[n/2]
	} else {
		r.median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	r.low, r.high, r.coverage = sorted[0], sorted[n-1], 1-2*math.Pow(0.5, float64(n))
	for k := 2; 2*k <= n; k++ {
		c := medianCoverage(n, k)
		if c < 0.85 {
			break
		}
		r.low, r.high, r.coverage = sorted[k-1], sorted[n-k], c
	}
	return r
}

// medianCoverage is P(x(k) ≤ median ≤ x(n+1-k)) for n draws of a
// continuous variable: 1 − 2·P(Binomial(n, ½) < k).
func medianCoverage(n, k int) float64 {
	tail, c := 0.0, 1.0 // c is n choose j
	for j := 0; j < k; j++ {
		tail += c
		c = c * float64(n-j) / float64(j+1)
	}
	return 1 - 2*tail/math.Pow(2, float64(n))
}

func (r ratios) String() string {
	if len(r.each) == 0 {
		return "-"
	}
	parts := make([]string, len(r.each))
	for i, x := range r.each {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.2f (%.0f %% interval %.2f–%.2f; pass by pass %s)", r.median, 100*r.coverage, r.low, r.high, strings.Join(parts, ", "))
}

// replaceSection rewrites the part of the report between this benchmark's
// markers, so that each benchmark owns its section.
func replaceSection(path, name, body string) error {
	begin, end := "<!-- bench:"+name+" -->", "<!-- /bench:"+name+" -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	if s == "" {
		s = "# Benchmarks\n\nFigures written by `make bench`; each section is replaced when its benchmark runs.\n"
	}
	section := begin + "\n" + body + end
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
