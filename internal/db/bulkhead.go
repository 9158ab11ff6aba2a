package db

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// Bulkhead keeps each tenant of a service to its share of the service's
// database connections, so that one project's burst or pile-up on a hot
// row cannot take the connections another project's requests need.
//
// A request enters the bulkhead when it first uses the database (a
// statement, a batch or a transaction of Pool, or InPipe) and leaves when
// it holds no connection any more; the connections one request uses at
// once count as one. At most Limit of a tenant's requests are inside at
// once; the next waits up to Wait for one to leave, then fails with
// ErrOverShare (503 with Retry-After), while other tenants are served as
// before. Work without a tenant in its context (background tasks, start-up)
// is not counted.
type Bulkhead struct {
	wait    time.Duration
	mu      sync.Mutex
	tenants map[string]*slots
	held    *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

type slots struct {
	sem   *semaphore.Weighted
	limit int64
}

// NewBulkhead makes a bulkhead whose requests wait at most wait for a place
// (default 2 s).
func NewBulkhead(wait time.Duration) *Bulkhead {
	if wait <= 0 {
		wait = 2 * time.Second
	}
	return &Bulkhead{wait: wait, tenants: map[string]*slots{},
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tally_project_db_requests",
			Help: "Requests of a project using the database now (its connections, a request's counted once)."}, []string{"project"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_project_over_share_total",
			Help: "Requests of a project refused with 503 because it held its whole share of the database."}, []string{"project"}),
	}
}

// Collectors are the bulkhead's metrics, for the service's registry.
func (b *Bulkhead) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.held, b.refused}
}

// Share is a tenant's limit for a share (at most 1) of a pool of maxConns
// connections: at least one.
func Share(maxConns int32, share float64) int64 {
	return max(1, int64(math.Ceil(float64(maxConns)*min(share, 1))))
}

// For returns ctx carrying tenant's place in the bulkhead, limit requests
// at most: Pool's statements, batches and transactions run under ctx then
// wait for it.
func (b *Bulkhead) For(ctx context.Context, tenant string, limit int64) context.Context {
	if b == nil {
		return ctx
	}
	b.mu.Lock()
	s := b.tenants[tenant]
	if s == nil || s.limit != limit {
		// A new limit (the plan changed) takes a new semaphore; requests
		// inside the old one leave it as they end.
		s = &slots{sem: semaphore.NewWeighted(limit), limit: limit}
		b.tenants[tenant] = s
	}
	b.mu.Unlock()
	return context.WithValue(ctx, leaseKey{}, &lease{b: b, tenant: tenant, s: s})
}

type leaseKey struct{}

// lease is one request's place in its tenant's bulkhead: taken by its
// first use of the database and given back when it uses none.
type lease struct {
	b      *Bulkhead
	tenant string
	s      *slots
	mu     sync.Mutex // held while the place is waited for: the request's other uses wait with it
	n      int
}

// ErrOverShare: the tenant holds its whole share of the database and none
// of it came free in time.
var ErrOverShare = errors.New("db: the project holds its whole share of the database")

// Hold takes the request's place in its tenant's bulkhead (if ctx carries
// one, see For) for longer than one use of the database: a service holds it
// for a whole request, so that the request's work outside the database
// (decoding, rules, encoding) counts against its project's share too. The
// uses of the database within it take no second place. Call what it
// returns once when done.
func Hold(ctx context.Context) (func(), error) { return enter(ctx) }

// enter takes the request's place in its tenant's bulkhead, if ctx carries
// one, and returns what gives it back (call it exactly once).
func enter(ctx context.Context) (func(), error) {
	l, _ := ctx.Value(leaseKey{}).(*lease)
	if l == nil {
		return noop, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		wctx, cancel := context.WithTimeout(ctx, l.b.wait)
		err := l.s.sem.Acquire(wctx, 1)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			l.b.refused.WithLabelValues(l.tenant).Inc()
			return nil, &classified{ErrOverShare, err}
		}
		l.b.held.WithLabelValues(l.tenant).Inc()
	}
	l.n++
	var once sync.Once
	return func() { once.Do(l.leave) }, nil
}

func (l *lease) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n--; l.n == 0 {
		l.s.sem.Release(1)
		l.b.held.WithLabelValues(l.tenant).Dec()
	}
}

func noop() {}
