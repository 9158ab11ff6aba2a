// Package cpushare keeps each project to its share of an instance's CPU
// while the instance is busy.
//
// The connection bulkhead (db.Bulkhead) caps how many requests of a project
// are inside an instance at once. That does not cap what they cost: four
// requests at a time queued on one hot row are answered one after another,
// hundreds a second, and each answer costs the router, the instance and the
// database CPU that every other project of the cluster shares. On a busy
// instance the others' requests then wait for a CPU, not for a connection.
//
// A Governor measures two things every tick (100 ms): how busy the CPU
// available to the instance is (Load: the cgroup's quota where one is set,
// else the machine), and what each project's requests cost (the time each
// one occupied the instance, from its admission to its answer). While the
// CPU is busier than Target and more than one project is active, a project
// whose share of the cost is more than its part of the active projects'
// shares (weighted by its plan's cluster_share) is paced: its requests are
// admitted no faster than a rate lowered step by step from what it was
// served, until the CPU is below Target or the project is within its part.
// When the CPU is idle again the pace rises step by step and is lifted.
// Pacing is work-conserving: a project alone on an instance, or an instance
// that is not busy, is never paced.
//
// A paced request waits in its project's own line (a token bucket, which
// holds no connection and costs no CPU) for at most Wait, then is answered
// 503 project_over_share with Retry-After. A project whose plan gives it the
// whole instance (share 1) is counted but never paced.
package cpushare

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Options of a Governor. Zero values take the defaults.
type Options struct {
	// Target is the CPU utilisation (0–1) above which the instance is busy
	// and projects over their part are paced (default 0.6). Below
	// Target-0.1 the pace rises again.
	Target float64
	// Interval is the tick (default 100 ms).
	Interval time.Duration
	// Wait is the longest a paced request waits for its turn (default 1 s).
	Wait time.Duration
	// Floor is the slowest a project is paced to, requests a second
	// (default 10).
	Floor float64
	// Load reads the CPU's utilisation since its last call (nil: CPULoad).
	// ok false: unknown, and the governor paces no one.
	Load func() (utilisation float64, ok bool)
	// Disabled: count nothing, pace no one.
	Disabled bool
	// Room is what the instance can be busy with at once, in busy-seconds
	// a second (default GOMAXPROCS): a project whose requests cost less
	// than its plan's share of it is within its share and never paced.
	Room float64
	// Now is the clock a request's cost is read from (nil: time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// ErrPaced: the project is paced and its turn would come after Wait.
var ErrPaced = errors.New("cpushare: the project is over its share of the instance's CPU")

// Governor paces projects over their share of a busy instance's CPU.
type Governor struct {
	opts    Options
	mu      sync.RWMutex
	tenants map[string]*tenant

	utilisation prometheus.Gauge
	paced       *prometheus.GaugeVec
	refused     *prometheus.CounterVec
}

type tenant struct {
	share atomic.Uint64 // float64 bits: the plan's cluster_share
	lim   atomic.Pointer[rate.Limiter]

	n       atomic.Int64 // requests admitted since the last tick
	cost    atomic.Int64 // ns of requests answered since the last tick
	waiting atomic.Int64 // requests waiting for their turn now

	// the tick's own, under its lock
	rate, costRate float64 // smoothed requests/s and busy-seconds/s
	quiet          int     // ticks without a request admitted or waiting
	seen           bool    // ticked once
}

// New makes a governor; Run ticks it.
func New(opts Options) *Governor {
	if opts.Target <= 0 || opts.Target > 1 {
		opts.Target = 0.6
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.Wait <= 0 {
		opts.Wait = time.Second
	}
	if opts.Floor <= 0 {
		opts.Floor = 10
	}
	if opts.Load == nil {
		opts.Load = CPULoad()
	}
	if opts.Room <= 0 {
		opts.Room = float64(runtime.GOMAXPROCS(0))
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Governor{opts: opts, tenants: map[string]*tenant{},
		utilisation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tally_instance_cpu_utilisation",
			Help: "How busy the CPU available to this instance was over the last tick (0-1); above the target, projects over their share are paced."}),
		paced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tally_project_cpu_paced_rate",
			Help: "The rate (requests/s) a project is paced to while the instance is busy; absent when not paced."}, []string{"project"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_project_cpu_refused_total",
			Help: "Requests of a paced project answered 503 because their turn was further off than the longest wait."}, []string{"project"}),
	}
}

// Collectors are the governor's metrics, for the service's registry.
func (g *Governor) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.utilisation, g.paced, g.refused}
}

// Admit waits for the project's turn if it is paced (at most Wait), counts
// the request, and returns what the caller calls with the request's
// answer: done() records what it cost, the time from now.
func (g *Governor) Admit(ctx context.Context, project string, share float64) (done func(), err error) {
	if g == nil || g.opts.Disabled {
		return noop, nil
	}
	t := g.tenant(project, share)
	if lim := t.lim.Load(); lim != nil && share < 1 {
		// Its turn, if that comes within Wait; else it waits Wait all the
		// same before the 503: refused at once, a project's clients would
		// ask again at once, and answering them is what costs the others.
		t.waiting.Add(1)
		defer t.waiting.Add(-1)
		r := lim.Reserve()
		d := r.Delay()
		if d > g.opts.Wait {
			r.Cancel()
			d = g.opts.Wait
			err = ErrPaced
		}
		if d > 0 {
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				r.Cancel()
				return nil, ctx.Err()
			}
		}
		if err != nil {
			g.refused.WithLabelValues(project).Inc()
			return nil, err
		}
	}
	t.n.Add(1)
	start := g.opts.Now()
	return func() { t.cost.Add(int64(g.opts.Now().Sub(start))) }, nil
}

func (g *Governor) tenant(project string, share float64) *tenant {
	g.mu.RLock()
	t := g.tenants[project]
	g.mu.RUnlock()
	if t == nil {
		g.mu.Lock()
		if t = g.tenants[project]; t == nil {
			t = &tenant{}
			g.tenants[project] = t
		}
		g.mu.Unlock()
	}
	t.share.Store(math.Float64bits(share))
	return t
}

// Run ticks the governor until ctx ends.
func (g *Governor) Run(ctx context.Context) {
	if g == nil || g.opts.Disabled {
		return
	}
	tick := time.NewTicker(g.opts.Interval)
	defer tick.Stop()
	g.opts.Load() // the first reading starts the first interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			u, ok := g.opts.Load()
			g.Tick(u, ok)
		}
	}
}

// Tick is one step of the governor with the CPU's utilisation over the
// last interval (ok false: unknown). Run calls it; tests call it with the
// load they make up.
func (g *Governor) Tick(u float64, ok bool) {
	if ok {
		g.utilisation.Set(u)
	}
	secs := g.opts.Interval.Seconds()
	second := max(1, int(time.Second/g.opts.Interval))
	g.mu.Lock()
	defer g.mu.Unlock()

	// What each project was served and what it cost, smoothed over about
	// half a second; a project is active while it had a request admitted
	// or waiting within the last second.
	const alpha = 0.3
	var active int
	var weights, cost float64
	for name, t := range g.tenants {
		n, c := t.n.Swap(0), t.cost.Swap(0)
		if !t.seen { // a new project's first tick is its rate, not a ramp from 0
			t.rate, t.costRate, t.seen = float64(n)/secs, float64(c)/1e9/secs, true
		}
		t.rate = (1-alpha)*t.rate + alpha*float64(n)/secs
		t.costRate = (1-alpha)*t.costRate + alpha*float64(c)/1e9/secs
		if n == 0 && t.waiting.Load() == 0 {
			t.quiet++
		} else {
			t.quiet = 0
		}
		if t.quiet >= 60*second && t.lim.Load() == nil {
			delete(g.tenants, name) // a minute without a request
			continue
		}
		if t.quiet < second {
			active++
			weights += math.Float64frombits(t.share.Load())
			cost += t.costRate
		}
	}

	busy := ok && u > g.opts.Target
	calm := !ok || u < g.opts.Target-0.1
	// What the active projects' requests could cost with the CPU at
	// Target, and each one's part of it by its share.
	capacity := cost
	if busy {
		capacity = cost * g.opts.Target / u
	}
	for name, t := range g.tenants {
		share := math.Float64frombits(t.share.Load())
		part := share / weights * capacity
		lim := t.lim.Load()
		// Over: more than its part of what the active projects cost (the
		// busy CPU's reduction aside: a project within that part is not
		// the one to slow, and pacing it made a light project wait a tick
		// per request beside a heavy one), and more than its share of the
		// instance (Room): a project that uses no more than its plan gives
		// it is never paced, whatever else keeps the CPU busy.
		over := active > 1 && share < 1 && t.quiet == 0 && t.costRate > part &&
			t.costRate > share/weights*cost && t.costRate > share*g.opts.Room
		switch {
		case busy && over:
			// Slower than it was served, and than its pace was, by at most
			// 15 % a tick and never below its part.
			r := t.rate
			if lim != nil {
				r = min(r, float64(lim.Limit()))
			}
			r = max(g.opts.Floor, r*max(0.85, part/t.costRate))
			if lim == nil {
				t.lim.Store(rate.NewLimiter(rate.Limit(r), burst(r)))
				g.opts.Log.Debug("cpushare: pacing a project", "project", name, "rate", r, "utilisation", u)
			} else {
				lim.SetLimit(rate.Limit(r))
				lim.SetBurst(burst(r))
			}
			g.paced.WithLabelValues(name).Set(r)
		case lim == nil:
		case active < 2 || t.quiet >= second:
			// Alone, or gone quiet: nobody to make room for.
			t.lim.Store(nil)
			g.paced.DeleteLabelValues(name)
		case calm:
			r := float64(lim.Limit()) * 1.05
			if r > 2*t.rate+g.opts.Floor {
				t.lim.Store(nil) // the pace no longer holds it back
				g.paced.DeleteLabelValues(name)
				continue
			}
			lim.SetLimit(rate.Limit(r))
			lim.SetBurst(burst(r))
			g.paced.WithLabelValues(name).Set(r)
		}
	}
}

// Paced is the rate a project is paced to, 0 if it is not.
func (g *Governor) Paced(project string) float64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if t := g.tenants[project]; t != nil {
		if lim := t.lim.Load(); lim != nil {
			return float64(lim.Limit())
		}
	}
	return 0
}

// burst lets a paced project's requests through in steps of a twentieth of
// a second at most.
func burst(r float64) int { return max(1, int(r/20)) }

func noop() {}
