package router

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/tenancy"
)

// fakeRing is a ring whose every counter is exact and in memory, counting
// the checks replicas send it on requests' paths and ahead of them.
type fakeRing struct {
	mu      sync.Mutex
	now     func() time.Time
	size    int
	owner   int // the replica owning every counter, -1 for none of those made by replicas
	buckets map[string]*rate.Limiter
	takes   int // on a request's path
	remote  int // of which by a replica that is not the owner
	aheads  int // taking leases or giving them back
}

func (f *fakeRing) take(b peerlimit.Bucket, key string, hits int64) peerlimit.Result {
	lim := f.buckets[key]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(float64(b.Rate)/b.Per.Seconds()), int(b.Burst))
		f.buckets[key] = lim
	}
	now := f.now()
	if hits < 0 { // given back, up to the burst
		lim.AllowN(now, int(max(hits, int64(lim.TokensAt(now))-b.Burst)))
		return peerlimit.Result{Allowed: true, Remaining: int64(lim.TokensAt(now)), Reset: now}
	}
	ok := lim.AllowN(now, int(hits))
	return peerlimit.Result{Allowed: ok, Remaining: int64(lim.TokensAt(now)), Reset: now.Add(time.Second)}
}

func (f *fakeRing) Take(_ context.Context, b peerlimit.Bucket, key string, hits int64) peerlimit.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	return f.take(b, key, hits)
}

func (f *fakeRing) TakeAhead(_ context.Context, b peerlimit.Bucket, key string, hits int64) (peerlimit.Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aheads++
	return f.take(b, key, hits), true
}

func (f *fakeRing) Size() int { return f.size }

// replicaView is the ring as replica self sees it.
type replicaView struct {
	*fakeRing
	self int
}

func (v replicaView) Owns(peerlimit.Bucket, string) bool { return v.self == v.owner }

func (v replicaView) Take(ctx context.Context, b peerlimit.Bucket, key string, hits int64) peerlimit.Result {
	if v.self != v.owner {
		v.mu.Lock()
		v.remote++
		v.mu.Unlock()
	}
	return v.fakeRing.Take(ctx, b, key, hits)
}

// replicas are n limiters on ring, their leases taken at once (inline).
func replicas(ring *fakeRing, n int) []*limiter {
	rs := make([]*limiter, n)
	for i := range rs {
		rs[i] = newLimiter(&fakeQuota{used: map[string]int64{}})
		rs[i].peers, rs[i].now, rs[i].ahead = replicaView{ring, i}, ring.now, func(f func()) { f() }
	}
	return rs
}

// Three replicas take an address's tokens ahead, a lease at a time: one
// token for small limits, up to 64 for large ones. Together they never let
// more through than the limit (the clock stands still: no refill, no
// lapse), an address sending its whole burst at once gets all of it
// wherever its counter's owner is, and requests spend leases without a
// call to the owner: only the first request of an address on each replica
// that is not the owner, those near the end of its burst, and those of an
// address over its limit once a second, call the owner on their path.
func TestLeasesKeepTheLimitAndSpareTheOwner(t *testing.T) {
	type tcase struct {
		name     string
		lim      tenancy.IPLimit
		requests int
		owner    int
		minOK    int // accepted at least
		maxOK    int // and at most
		maxCalls int // checks sent to the owner by the other replicas on requests' paths, at most
	}
	var cases []tcase
	for owner := range 3 {
		cases = append(cases,
			tcase{fmt.Sprintf("the interface's 5 per 5 s, three times over, replica %d the owner", owner),
				tenancy.IPLimit{Requests: 5, Seconds: 5}, 30, owner, 5, 5, 2 + 2},
			tcase{fmt.Sprintf("5 per 5 s, the burst at once, replica %d the owner", owner),
				tenancy.IPLimit{Requests: 5, Seconds: 5}, 5, owner, 5, 5, 2})
	}
	cases = append(cases,
		tcase{"a burst of 20 over 3 replicas, three times over", tenancy.IPLimit{Requests: 20, Seconds: 5}, 60, 2, 20, 20, 2 + 2 + 2},
		// Leases of 64 until fewer than two are left at the owner, then
		// one at a time.
		tcase{"1,000 per 10 s, three times over", tenancy.IPLimit{Requests: 1000, Seconds: 10}, 3000, 2, 1000, 1000, 2 + 2*(2*64+64/4) + 2},
		tcase{"1,000 per 10 s, under the limit", tenancy.IPLimit{Requests: 1000, Seconds: 10}, 900, 2, 900, 900, 2},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			ring := &fakeRing{now: func() time.Time { return now }, size: 3, owner: tc.owner, buckets: map[string]*rate.Limiter{}}
			rs := replicas(ring, 3)
			ok := 0
			for i := range tc.requests {
				if v := rs[i%3].client("p1", "198.51.100.7", tc.lim); !v.refused {
					ok++
				}
			}
			t.Logf("%d accepted; %d checks on requests' paths (%d by other replicas than the owner), %d ahead", ok, ring.takes, ring.remote, ring.aheads)
			if ok < tc.minOK || ok > tc.maxOK {
				t.Fatalf("%d of %d accepted, want %d to %d", ok, tc.requests, tc.minOK, tc.maxOK)
			}
			if ring.remote > tc.maxCalls {
				t.Fatalf("%d calls to the owner on requests' paths, want at most %d", ring.remote, tc.maxCalls)
			}
		})
	}
}

// An address sending one request a second, each to the next of three
// replicas (as the ring benchmark does): once each replica holds a lease,
// no request asks the owner on its path, and the address is never refused.
func TestLeasesServeASteadyAddressWithoutACall(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ring := &fakeRing{now: func() time.Time { return now }, size: 3, owner: 1, buckets: map[string]*rate.Limiter{}}
	rs := replicas(ring, 3)
	lim := tenancy.IPLimit{Requests: 5, Seconds: 5}
	for i := range 60 {
		if v := rs[i%3].client("p1", "198.51.100.7", lim); v.refused {
			t.Fatalf("request %d refused", i)
		}
		now = now.Add(time.Second)
	}
	if ring.remote != 2 {
		t.Fatalf("%d calls to the owner on requests' paths, want 2 (the first of each other replica)", ring.remote)
	}
}

// A lease lapses after leaseLife: the tokens it left are given back, not
// spent later.
func TestALeaseLapses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ring := &fakeRing{now: func() time.Time { return now }, size: 2, owner: 1, buckets: map[string]*rate.Limiter{}}
	l := replicas(ring, 1)[0]
	lim := tenancy.IPLimit{Requests: 1000, Seconds: 1000}
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 1 || ring.aheads != 1 {
		t.Fatalf("first request: %d checks on its path, %d ahead; want 1 and 1", ring.takes, ring.aheads)
	}
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 1 || ring.aheads != 1 {
		t.Fatalf("the second request asked the owner: %d checks, %d ahead", ring.takes, ring.aheads)
	}
	left := ring.buckets["p1|198.51.100.7|1000/1000"].TokensAt(now)
	now = now.Add(leaseLife)
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 2 {
		t.Fatalf("after the lease lapsed, %d checks on the path, want 2", ring.takes)
	}
	// 10 refilled and 63 given back, up to the burst; then 1 taken on the
	// path and 64 ahead. Not given back, it would be 880.
	if got, want := ring.buckets["p1|198.51.100.7|1000/1000"].TokensAt(now), min(left+10+63, 1000)-1-64; got != want {
		t.Fatalf("the owner's bucket: %v tokens, want %v", got, want)
	}
}
