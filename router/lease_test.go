package router

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/tenancy"
)

// fakeRing is a ring whose every counter is exact and in memory, counting
// the checks replicas send it.
type fakeRing struct {
	mu      sync.Mutex
	now     func() time.Time
	size    int
	buckets map[string]*rate.Limiter
	takes   int
}

func (f *fakeRing) Take(_ context.Context, b ring.Bucket, key string, hits int64) ring.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	lim := f.buckets[key]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(float64(b.Rate)/b.Per.Seconds()), int(b.Burst))
		f.buckets[key] = lim
	}
	now := f.now()
	ok := lim.AllowN(now, int(hits))
	return ring.Result{Allowed: ok, Remaining: int64(lim.TokensAt(now)), Reset: now}
}

func (f *fakeRing) Size() int { return f.size }

// A replica takes an address's tokens from the owner a lease at a time
// when its limit is large beside the ring, and one at a time otherwise;
// either way, the replicas together never let more through than the
// limit, and a lease left unspent costs the address at most a lease per
// replica.
func TestLeasesKeepTheLimitAndSpareTheOwner(t *testing.T) {
	cases := []struct {
		name     string
		lim      tenancy.IPLimit
		requests int
		minOK    int // accepted at least
		maxOK    int // and at most
		minTakes int // checks sent to the owners, at least
		maxTakes int // and at most
	}{
		{"the interface's 5 per 5 s: every request asks the owner", tenancy.IPLimit{Requests: 5, Seconds: 5}, 30, 5, 5, 30, 30},
		{"a burst of 20 over 3 replicas: still one at a time", tenancy.IPLimit{Requests: 20, Seconds: 5}, 60, 20, 20, 60, 60},
		// 15 leases of 64 (5 a replica), then one failed lease a replica
		// and one check a request for the rest.
		{"1,000 per 10 s, three times over: leases, then one at a time", tenancy.IPLimit{Requests: 1000, Seconds: 10}, 3000, 1000 - 3*63, 1000,
			0, 1000/64 + 3 + 3 + (3000 - (1000 - 3*63))},
		{"1,000 per 10 s, under the limit: a lease per 64 requests", tenancy.IPLimit{Requests: 1000, Seconds: 10}, 900, 900, 900, 900 / 64, 900/64 + 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			clock := func() time.Time { return now }
			ring := &fakeRing{now: clock, size: 3, buckets: map[string]*rate.Limiter{}}
			replicas := make([]*limiter, 3)
			for i := range replicas {
				replicas[i] = newLimiter(&fakeQuota{used: map[string]int64{}})
				replicas[i].peers, replicas[i].now = ring, clock
			}
			ok := 0
			for i := range tc.requests {
				if v := replicas[i%3].client("p1", "198.51.100.7", tc.lim); !v.refused {
					ok++
				}
			}
			if ok < tc.minOK || ok > tc.maxOK {
				t.Fatalf("%d of %d accepted, want %d to %d", ok, tc.requests, tc.minOK, tc.maxOK)
			}
			if ring.takes < tc.minTakes || ring.takes > tc.maxTakes {
				t.Fatalf("%d checks reached the owner, want %d to %d", ring.takes, tc.minTakes, tc.maxTakes)
			}
		})
	}
}

// A lease lapses after leaseLife: the tokens it left are not spent later.
func TestALeaseLapses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	ring := &fakeRing{now: clock, size: 1, buckets: map[string]*rate.Limiter{}}
	l := newLimiter(&fakeQuota{used: map[string]int64{}})
	l.peers, l.now = ring, clock
	lim := tenancy.IPLimit{Requests: 1000, Seconds: 10}
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 1 {
		t.Fatalf("%d checks for the first request", ring.takes)
	}
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 1 {
		t.Fatalf("the second request asked the owner: %d checks", ring.takes)
	}
	now = now.Add(leaseLife)
	l.client("p1", "198.51.100.7", lim)
	if ring.takes != 2 {
		t.Fatalf("after the lease lapsed, %d checks, want 2", ring.takes)
	}
}
