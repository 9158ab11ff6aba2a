package router

import (
	"context"
	"strconv"
	"time"

	"github.com/tallyhq/tally/internal/lrux"
	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/tenancy"
)

// The per-address limits kept by the region's ring of router replicas
// (Config.PeerLimits, internal/peerlimit): the counter of an address is
// kept by one replica, its owner, and every replica asks it, so that an
// address spread over N replicas by a balancer gets its limit once, not N
// times. Without a ring, each replica keeps its own (client and
// lookupBudget in ratelimit.go).

// clientCentral is client on the ring: the same bucket (the project's
// requests at once, refilled over its seconds), kept by its owner.
func (l *limiter) clientCentral(projectID, ip string, lim tenancy.IPLimit) verdict {
	key := projectID + "|" + addrKey(ip) + "|" + strconv.Itoa(lim.Requests) + "/" + strconv.Itoa(lim.Seconds)
	per := time.Duration(lim.Seconds) * time.Second
	r := l.peers.Take(context.Background(), peerlimit.Bucket{Name: "client_ip", Rate: int64(lim.Requests), Per: per,
		Burst: int64(lim.Requests)}, key, 1)
	v := verdict{name: "client", limit: int64(lim.Requests), window: per, remaining: r.Remaining, reset: r.Reset}
	if !r.Allowed {
		v.refused, v.remaining = true, 0
		l.limited.WithLabelValues("client_ip").Inc()
	}
	return v
}

// lookupBucket is an address's lookup budget on the ring: lookupBurst at
// once, then lookupRate a second.
var lookupBucket = peerlimit.Bucket{Name: "directory_lookups", Rate: lookupRate, Per: time.Second, Burst: lookupBurst}

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
