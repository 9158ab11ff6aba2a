package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"fortio.org/fortio/periodic"
	"github.com/google/pprof/profile"
)

// The bench runs the platform (router and regional service) and its load
// generator in one process, so the process's CPU per request is the load
// generator's too. devstack runs each server under the pprof label
// server=router or server=service, which its connections' goroutines
// inherit (from reading the request to writing the answer, with the
// router's upstream connections and anything a handler starts); a CPU
// profile of a measured phase summed by that label, over the requests the
// phase made, is then each tier's CPU per request. What carries no label
// is the load generator, the garbage collector's background workers and
// the runtime's.

// cpuShare is a measured phase's CPU per request, in milliseconds, by
// tier.
type cpuShare struct {
	requests                int64
	regional, router, other float64
}

// service is the platform's CPU per request: the router's and the
// regional service's, without the load generator's.
func (c cpuShare) service() float64 { return c.regional + c.router }

// whole is the process's CPU per request, the load generator's included.
func (c cpuShare) whole() float64 { return c.regional + c.router + c.other }

func (c cpuShare) String() string {
	return fmt.Sprintf("regional %.2f, router %.2f, platform %.2f, whole process %.2f ms (%d requests)",
		c.regional, c.router, c.service(), c.whole(), c.requests)
}

// cpuProbe is a CPU profile being taken into memory, and into file too
// when one is named (the -cpuprofile flag's).
type cpuProbe struct {
	buf  bytes.Buffer
	file string
}

// startCPU starts the process's CPU profile; only one may run at a time.
func startCPU(file string) (*cpuProbe, error) {
	p := &cpuProbe{file: file}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the profile and shares its CPU among the requests made while
// it ran.
func (p *cpuProbe) stop(requests int64) (cpuShare, error) {
	pprof.StopCPUProfile()
	if p.file != "" {
		if err := os.WriteFile(p.file, p.buf.Bytes(), 0o644); err != nil {
			return cpuShare{}, err
		}
	}
	return shareOf(&p.buf, requests)
}

// shareOf sums a CPU profile's samples by their server label.
func shareOf(r io.Reader, requests int64) (cpuShare, error) {
	s := cpuShare{requests: requests}
	prof, err := profile.Parse(r)
	if err != nil {
		return s, err
	}
	k := -1
	for i, st := range prof.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			k = i
		}
	}
	if k < 0 {
		return s, fmt.Errorf("the CPU profile has no cpu/nanoseconds samples")
	}
	var regional, router, other int64
	for _, smp := range prof.Sample {
		v := smp.Value[k]
		switch server := smp.Label["server"]; {
		case len(server) == 0:
			other += v
		case server[0] == "router":
			router += v
		default: // the regional service (management is not called in a measured phase)
			regional += v
		}
	}
	if requests > 0 {
		per := func(ns int64) float64 { return float64(ns) / float64(time.Millisecond) / float64(requests) }
		s.regional, s.router, s.other = per(regional), per(router), per(other)
	}
	return s, nil
}

// atRateCPU runs runners at qps for 2 s of warm-up and then for d, the
// measured phase, under a CPU profile (also written to file when one is
// named).
func atRateCPU(qps float64, runners []periodic.Runnable, d time.Duration, file string) (periodic.RunnerResults, cpuShare, error) {
	run := func(d time.Duration) periodic.RunnerResults {
		ro := periodic.RunnerOptions{QPS: qps, Duration: d, NumThreads: len(runners), Percentiles: []float64{50, 95, 99},
			Out: io.Discard, Uniform: true}
		pr := periodic.NewPeriodicRunner(&ro)
		copy(pr.Options().Runners, runners)
		return pr.Run()
	}
	run(2 * time.Second)
	p, err := startCPU(file)
	if err != nil {
		return run(d), cpuShare{}, err
	}
	res := run(d)
	share, err := p.stop(res.DurationHistogram.Count)
	return res, share, err
}
