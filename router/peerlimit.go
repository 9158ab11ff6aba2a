package router

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/lrux"
	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/tenancy"
)

// The per-address limits kept by the region's ring of router replicas
// (Config.PeerLimits, internal/peerlimit): the counter of an address is
// kept by one replica, its owner, and every replica asks it, so that an
// address spread over N replicas by a balancer gets its limit once, not N
// times. Without a ring, each replica keeps its own (client and
// lookupBudget in ratelimit.go).

// peerRing is the region's ring of replicas (peerlimit.Limiter).
type peerRing interface {
	Take(ctx context.Context, b peerlimit.Bucket, key string, hits int64) peerlimit.Result
	// TakeAhead is Take with no share to fall back on: ok is false when
	// the owner did not answer.
	TakeAhead(ctx context.Context, b peerlimit.Bucket, key string, hits int64) (peerlimit.Result, bool)
	// Owns: this replica keeps key's counter, so checking it is no call.
	Owns(b peerlimit.Bucket, key string) bool
	Size() int
}

// Tokens taken ahead. A check whose counter another replica owns is a
// call to it: 0.2-0.5 ms on the request's path, more on a busy machine.
// So a replica takes an address's tokens from the owner ahead of need, in
// the background, and its requests spend them without a call: a lease.
// The first request of an address on a replica asks the owner on its
// path, and has the replica take a lease ahead for the next; each lease
// spent down to a quarter is taken again in the background. A lease is a
// quarter of the burst over the ring's size, at least one token and at
// most leaseMax: with the interface's 5 per 5 s and three replicas, one.
// The owner checks its own counters on the spot (no call) and takes no
// lease. A replica the owner refused an address refuses it too, without
// asking, until the owner's next token is due (at most leaseRetry): an
// address over its limit costs the owner a call a second per replica,
// not one a request.
//
// What this costs the limit, both ways: the owner counted a lease's tokens
// when it was taken, up to leaseLife before they are spent, and the bucket
// may have refilled meanwhile; so besides its burst an address may get, at
// most, the leases the other replicas hold (N − 1 tokens for 5 per 5 s:
// 7 at once instead of 5 with three replicas, once, not again until it
// has been idle on them). And while leases sit unspent on replicas an
// address no longer uses, it may be refused early by as many, for at most
// leaseLife, after which they are given back on their next use.
const (
	leaseMax  = 64
	leaseLife = 10 * time.Second
	// leaseRetry is how long a replica whose lease was refused (fewer
	// tokens left than a lease) or not answered waits before asking again:
	// meanwhile its requests ask the owner one token at a time.
	leaseRetry = time.Second
)

// lease is a replica's tokens of one address's counter, taken ahead.
type lease struct {
	mu        sync.Mutex
	tokens    int64
	until     time.Time // the tokens lapse then
	taking    bool      // a lease is being taken
	notBefore time.Time // no lease taken before then
	refused   time.Time // the owner refused a request: until then, so does this replica, without asking
	remaining int64     // the owner's count when the lease was taken
	reset     time.Time
}

// leaseSize is how many tokens a replica takes at once from a burst of
// burst kept by a ring of ring replicas.
func leaseSize(burst int64, ring int) int64 {
	return max(1, min(leaseMax, burst/int64(4*max(ring, 1))))
}

// clientCentral is client on the ring: the same bucket (the project's
// requests at once, refilled over its seconds), kept by its owner.
func (l *limiter) clientCentral(projectID, ip string, lim tenancy.IPLimit) verdict {
	key := projectID + "|" + addrKey(ip) + "|" + strconv.Itoa(lim.Requests) + "/" + strconv.Itoa(lim.Seconds)
	per := time.Duration(lim.Seconds) * time.Second
	b := peerlimit.Bucket{Name: "client_ip", Rate: int64(lim.Requests), Per: per, Burst: int64(lim.Requests)}
	v := verdict{name: "client", limit: int64(lim.Requests), window: per}
	if l.peers.Owns(b, key) {
		return l.takeAtOwner(b, key, v)
	}
	ls := lrux.GetOrAdd(l.leases, key, func() *lease { return &lease{} })
	now := l.now()
	ls.mu.Lock()
	if ls.tokens > 0 && !now.Before(ls.until) { // lapsed: given back
		back := ls.tokens
		ls.tokens = 0
		ls.mu.Unlock()
		l.ahead(func() { l.peers.TakeAhead(context.Background(), b, key, -back) })
		ls.mu.Lock()
	}
	if now.Before(ls.refused) {
		ls.mu.Unlock()
		v.refused, v.reset = true, ls.refused
		l.limited.WithLabelValues("client_ip").Inc()
		return v
	}
	if ls.tokens > 0 {
		ls.tokens--
		v.remaining, v.reset = ls.remaining+ls.tokens, ls.reset
		more := l.leaseDue(ls, b, now, math.MaxInt64)
		ls.mu.Unlock()
		if more > 0 {
			l.ahead(func() { l.takeLease(ls, b, key, more) })
		}
		return v
	}
	ls.mu.Unlock()
	v = l.takeAtOwner(b, key, v)
	ls.mu.Lock()
	more := int64(0)
	if v.refused {
		ls.notBefore, ls.refused = now.Add(leaseRetry), v.reset
		if ls.refused.After(ls.notBefore) {
			ls.refused = ls.notBefore
		}
	} else {
		more = l.leaseDue(ls, b, now, v.remaining)
	}
	ls.mu.Unlock()
	if more > 0 {
		l.ahead(func() { l.takeLease(ls, b, key, more) })
	}
	return v
}

// takeAtOwner takes one token at the counter's owner.
func (l *limiter) takeAtOwner(b peerlimit.Bucket, key string, v verdict) verdict {
	r := l.peers.Take(context.Background(), b, key, 1)
	v.remaining, v.reset = r.Remaining, r.Reset
	if !r.Allowed {
		v.refused, v.remaining = true, 0
		l.limited.WithLabelValues("client_ip").Inc()
	}
	return v
}

// leaseDue is the size of the lease to take now, 0 for none: when a
// quarter of the last is left, none is being taken, the owner did not
// refuse one within leaseRetry, and the owner, with left tokens (as last
// heard), can spare one and still hold a lease for each of the other
// replicas that take them (all but itself: see takeLease). ls.mu is held;
// the lease is marked as being taken.
func (l *limiter) leaseDue(ls *lease, b peerlimit.Bucket, now time.Time, left int64) int64 {
	n := int64(l.peers.Size())
	size := leaseSize(b.Burst, int(n))
	if ls.taking || now.Before(ls.notBefore) || ls.tokens*4 > size || left < (n-1)*size {
		return 0
	}
	ls.taking = true
	return size
}

// takeLease takes size tokens ahead from the owner (in the background).
// A lease that leaves the owner less than a lease for each of the other
// replicas that take them (N − 2: neither this one nor the owner) is
// given back at once: near the end of an address's burst its tokens stay
// with the owner, where any replica's next request finds them, rather
// than on a replica its requests may not come back to. So an address
// sending its whole burst at once over the ring gets all of it.
func (l *limiter) takeLease(ls *lease, b peerlimit.Bucket, key string, size int64) {
	ctx := context.Background()
	r, ok := l.peers.TakeAhead(ctx, b, key, size)
	for ok && !r.Allowed && size > 1 && r.Remaining > 0 { // fewer left than a lease: a smaller one
		size = max(1, min(size/2, r.Remaining))
		r, ok = l.peers.TakeAhead(ctx, b, key, size)
	}
	if ok && r.Allowed && r.Remaining < int64(l.peers.Size()-2)*size {
		l.peers.TakeAhead(ctx, b, key, -size)
		ok = false
	}
	now := l.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.taking = false
	if !ok || !r.Allowed {
		ls.notBefore = now.Add(leaseRetry)
		return
	}
	ls.tokens += size
	ls.until, ls.remaining, ls.reset = now.Add(leaseLife), r.Remaining, r.Reset
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

// background runs fn in a goroutine of its own; a panic there is logged,
// not the process's end.
func background(fn func()) {
	go func() {
		if err := runtimex.Call(func() error { fn(); return nil }); err != nil {
			slog.Error("router: taking a lease of a per-address limit", "err", err)
		}
	}()
}
