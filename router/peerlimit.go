package router

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/lrux"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/tenancy"
)

// The per-address limits kept by the region's ring of router replicas
// (Config.PeerLimits, internal/peerlimit): the counter of an address is
// kept by one replica, its owner, and every replica asks it, so that an
// address spread over N replicas by a balancer gets its limit once, not N
// times. Without a ring, each replica keeps its own (client and
// lookupBudget in ratelimit.go).

// peerRing is the region's ring of replicas (ring.Ring, less its metrics).
type peerRing interface {
	Take(ctx context.Context, b ring.Bucket, key string, hits int64) ring.Result
	Size() int
}

// Leases. A check whose counter another replica owns is a call to it: a
// fifth of a request's cost at the router. An address whose limit is
// large beside the ring (a burst of at least 2 × 4 per replica) is
// therefore checked a lease at a time: a replica takes several of its
// tokens from the owner at once and spends them itself. The owner has
// counted them, so the address still never gets more than its limit;
// what a lease leaves unspent when it lapses is not given back, so an
// address may be refused early by at most what the other replicas hold:
// a lease is at most a quarter of the burst over the ring's size, and
// leaseMax. With the interface's 5 requests per 5 s a lease is one token:
// every request asks the owner.
const (
	leaseMax  = 64
	leaseLife = 10 * time.Second
	// leaseRetry is how long a replica whose lease was refused (fewer
	// tokens left than a lease) takes one token at a time, one check per
	// request rather than two.
	leaseRetry = time.Second
)

// lease is a replica's tokens of one address's counter, taken ahead.
type lease struct {
	mu        sync.Mutex
	tokens    int64
	until     time.Time
	single    time.Time // until then, no lease: one token at a time
	remaining int64     // the owner's count when the lease was taken
	reset     time.Time
}

// leaseSize is how many tokens a replica takes at once from a burst of
// burst kept by a ring of ring replicas; 1 is no lease.
func leaseSize(burst int64, ring int) int64 {
	return max(1, min(leaseMax, burst/int64(4*max(ring, 1))))
}

// clientCentral is client on the ring: the same bucket (the project's
// requests at once, refilled over its seconds), kept by its owner.
func (l *limiter) clientCentral(projectID, ip string, lim tenancy.IPLimit) verdict {
	key := projectID + "|" + addrKey(ip) + "|" + strconv.Itoa(lim.Requests) + "/" + strconv.Itoa(lim.Seconds)
	per := time.Duration(lim.Seconds) * time.Second
	b := ring.Bucket{Name: "client_ip", Rate: int64(lim.Requests), Per: per, Burst: int64(lim.Requests)}
	v := verdict{name: "client", limit: int64(lim.Requests), window: per}
	if b.Burst >= 2*4 {
		ls := lrux.GetOrAdd(l.leases, key, func() *lease { return &lease{} })
		ls.mu.Lock()
		defer ls.mu.Unlock()
		now := l.now()
		if ls.tokens > 0 && now.Before(ls.until) {
			ls.tokens--
			v.remaining, v.reset = ls.remaining+ls.tokens, ls.reset
			return v
		}
		if size := leaseSize(b.Burst, l.peers.Size()); size > 1 && !now.Before(ls.single) {
			if r := l.peers.Take(context.Background(), b, key, size); r.Allowed {
				ls.tokens, ls.until, ls.remaining, ls.reset = size-1, now.Add(leaseLife), r.Remaining, r.Reset
				v.remaining, v.reset = r.Remaining+ls.tokens, r.Reset
				return v
			}
			ls.single = now.Add(leaseRetry) // fewer left than a lease: one at a time, below
		}
	}
	r := l.peers.Take(context.Background(), b, key, 1)
	v.remaining, v.reset = r.Remaining, r.Reset
	if !r.Allowed {
		v.refused, v.remaining = true, 0
		l.limited.WithLabelValues("client_ip").Inc()
	}
	return v
}

// lookupBucket is an address's lookup budget on the ring: lookupBurst at
// once, then lookupRate a second.
var lookupBucket = ring.Bucket{Name: "directory_lookups", Rate: lookupRate, Per: time.Second, Burst: lookupBurst}

// takeCentral is Take on the ring. A lookup is charged to the address's
// counter before its query and given back when the name exists: charged
// first, lookups under way on every replica count against the budget
// (charging misses afterwards, as a replica alone does, would let each
// replica's concurrent lookups overdraw it). On a replica, a name under
// way is charged once, however many of the address's requests wait on it.
func (b lookupBudget) takeCentral(name string) (func(found bool), bool) {
	addr := addrKey(b.ip)
	a := lrux.GetOrAdd(b.l.lookups, addr, func() *addrLookups { return &addrLookups{} })
	a.mu.Lock()
	n := a.names[name]
	if n == nil {
		a.mu.Unlock()
		if !b.l.peers.Take(context.Background(), lookupBucket, addr, 1).Allowed {
			b.l.limited.WithLabelValues("directory_lookups").Inc()
			return nil, false
		}
		a.mu.Lock()
		if n = a.names[name]; n != nil { // another request charged it meanwhile: one charge is enough
			go b.l.peers.Take(context.Background(), lookupBucket, addr, -1)
		} else {
			if a.names == nil {
				a.names = map[string]*nameLookup{}
			}
			n = &nameLookup{}
			a.names[name] = n
		}
	}
	n.callers++
	a.mu.Unlock()
	return func(found bool) {
		a.mu.Lock()
		n.missed = n.missed || !found
		n.callers--
		last := n.callers == 0
		if last {
			delete(a.names, name)
		}
		a.mu.Unlock()
		if last && !n.missed {
			// The name exists: its lookup is given back (off the
			// request's path).
			go b.l.peers.Take(context.Background(), lookupBucket, addr, -1)
		}
	}, true
}
