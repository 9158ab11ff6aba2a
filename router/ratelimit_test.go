package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tallyhq/tally/tenancy"
)

// fakeQuota is the tenancy table's lease, in memory.
type fakeQuota struct {
	mu    sync.Mutex
	used  map[string]int64
	down  bool
	calls int
}

func (f *fakeQuota) LeaseQuota(ctx context.Context, project string, window time.Duration, start time.Time, want, limit int64) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if err := ctx.Err(); err != nil {
		return 0, 0, err // as the driver answers on a cancelled context
	}
	if f.down {
		return 0, 0, errors.New("tenancy database down")
	}
	k := project + window.String() + start.String()
	g := min(want, max(limit-f.used[k], 0))
	f.used[k] += g
	return g, f.used[k], nil
}

// leases is how many leases were asked (refills run in the background).
func (f *fakeQuota) leases() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeQuota) DropRateWindows(context.Context, time.Time) error { return nil }

// Three replicas leasing from one window never let more than the limit
// through, lease rather than write per request, and start again with the
// next window; with the database down each keeps to its share.
func TestReplicasLeasingOneWindowNeverPassItsLimit(t *testing.T) {
	store := &fakeQuota{used: map[string]int64{}}
	now := time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)
	clock := func() time.Time { return now }
	var replicas []*limiter
	for range 3 {
		l := newLimiter(store)
		l.now = clock
		replicas = append(replicas, l)
	}
	accepted := 0
	for i := range 3000 { // 10× a limit of 300 a minute, spread over the replicas
		now = now.Add(15 * time.Millisecond)
		if now.Minute() != 0 {
			break
		}
		vs := replicas[i%3].project(context.Background(), "proj_a", 300, 0)
		if !vs[0].refused {
			accepted++
		}
	}
	if accepted > 300 || accepted < 300-3*2*15 {
		t.Fatalf("%d accepted in the minute, want at most 300 and at least 300 less three replicas' last two leases", accepted)
	}
	if store.leases() > 600 {
		t.Fatalf("%d leases for %d requests: a lease should carry several", store.leases(), 3000)
	}
	// The next window starts afresh.
	now = time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC)
	if vs := replicas[0].project(context.Background(), "proj_a", 300, 0); vs[0].refused || vs[0].remaining <= 0 {
		t.Fatalf("the next minute: %+v", vs[0])
	}
	// The database goes away: a replica that had leased a third of the
	// window so far keeps to about a third of the limit.
	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	ok := 0
	for range 300 {
		now = now.Add(10 * time.Millisecond)
		if vs := replicas[0].project(context.Background(), "proj_a", 300, 0); !vs[0].refused {
			ok++
		}
	}
	if ok == 0 || ok > 300 {
		t.Fatalf("%d let through failing open", ok)
	}
}

// A replica that starts serving a project half an hour into its hour
// window sizes its leases by its own traffic since then, not by the
// window's age: 2,000 requests in two seconds take a few dozen leases,
// not one each (which held every request of the project on the lease's
// round trip).
func TestLeasesFollowTheReplicasOwnTraffic(t *testing.T) {
	store := &fakeQuota{used: map[string]int64{}}
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	l := newLimiter(store)
	l.now = func() time.Time { return now }
	for range 2000 {
		now = now.Add(time.Millisecond)
		if vs := l.project(context.Background(), "proj_b", 0, 1_000_000); vs[0].refused {
			t.Fatal("refused under the limit")
		}
	}
	if store.leases() > 50 {
		t.Fatalf("%d leases for 2,000 requests", store.leases())
	}
}

// The per-address bucket: 5 at once, then one a second.
func TestClientAddressesGetTheirOwnBuckets(t *testing.T) {
	l := newLimiter(&fakeQuota{used: map[string]int64{}})
	now := time.Now()
	l.now = func() time.Time { return now }
	for i := range 5 {
		if v := l.client("p", "198.51.100.7", tenancy.DefaultClientIPLimit); v.refused {
			t.Fatalf("request %d refused", i+1)
		}
	}
	v := l.client("p", "198.51.100.7", tenancy.DefaultClientIPLimit)
	if !v.refused || v.reset.Sub(now) <= 0 || v.reset.Sub(now) > time.Second {
		t.Fatalf("the sixth: %+v", v)
	}
	if v := l.client("p", "198.51.100.8", tenancy.DefaultClientIPLimit); v.refused {
		t.Fatal("another address was refused")
	}
	if v := l.client("q", "198.51.100.7", tenancy.DefaultClientIPLimit); v.refused {
		t.Fatal("the same address of another project was refused")
	}
	now = now.Add(1100 * time.Millisecond)
	if v := l.client("p", "198.51.100.7", tenancy.DefaultClientIPLimit); v.refused {
		t.Fatal("a second later the bucket has a token again")
	}
}

// One client holds a whole IPv6 /64 (a host picks any address of it at
// will) and may be seen as IPv4 or IPv4-mapped IPv6, or with a port a
// proxy appended: none of these is a fresh bucket.
func TestAnAddressCannotDodgeItsBucket(t *testing.T) {
	l := newLimiter(&fakeQuota{used: map[string]int64{}})
	now := time.Now()
	l.now = func() time.Time { return now }
	for _, set := range [][]string{
		{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9", "2001:DB8:1:2::3", "2001:db8:1:2::4", "[2001:db8:1:2::7]:443"},
		{"198.51.100.7", "::ffff:198.51.100.7", "198.51.100.7:5000", "198.51.100.7", "198.51.100.7", "198.51.100.7"},
	} {
		for i, ip := range set {
			v := l.client("p", ip, tenancy.DefaultClientIPLimit)
			if i < 5 && v.refused {
				t.Fatalf("%s (request %d) refused", ip, i+1)
			}
			if i == 5 && !v.refused {
				t.Fatalf("the sixth request, from %s, was served: %v get their own buckets", ip, set)
			}
		}
	}
	if v := l.client("p", "2001:db8:1:3::1", tenancy.DefaultClientIPLimit); v.refused {
		t.Fatal("another /64 was refused")
	}
}

// What a replica let through while the database was away is charged to
// the window when it is back: one replica keeps to the limit (the
// documented worst case is N × the limit for N replicas), rather than
// failing open on the whole limit and then leasing the window's rest.
func TestRequestsLetThroughFailingOpenAreChargedWhenTheDatabaseIsBack(t *testing.T) {
	store := &fakeQuota{used: map[string]int64{}}
	now := time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)
	l := newLimiter(store)
	l.now = func() time.Time { return now }
	accepted := 0
	send := func(n int) {
		for range n {
			now = now.Add(10 * time.Millisecond)
			if vs := l.project(context.Background(), "proj_f", 100, 0); !vs[0].refused {
				accepted++
			}
		}
	}
	send(1)
	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	send(200)
	store.mu.Lock()
	store.down = false
	store.mu.Unlock()
	send(200)
	if accepted > 100 {
		t.Fatalf("%d accepted in the minute by one replica with a limit of 100", accepted)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if used := store.used["proj_f"+time.Minute.String()+now.Truncate(time.Minute).String()]; used != 100 {
		t.Fatalf("the window's row counts %d, want the 100 let through", used)
	}
}

// A request whose client hung up still takes its lease: its cancellation
// is not the database being away, and the lease serves the window's other
// requests.
func TestAHungUpClientsLeaseIsNoFailOpen(t *testing.T) {
	store := &fakeQuota{used: map[string]int64{}}
	l := newLimiter(store)
	gone, hangUp := context.WithCancel(context.Background())
	hangUp()
	if vs := l.project(gone, "proj_a", 300, 0); vs[0].refused {
		t.Fatalf("refused: %+v", vs[0])
	}
	if n := testutil.ToFloat64(l.failOpen); n != 0 {
		t.Fatalf("%v requests counted as let through failing open", n)
	}
	if store.leases() == 0 || store.used["proj_a"+time.Minute.String()+l.now().Truncate(time.Minute).String()] == 0 {
		t.Fatalf("no quota leased: %v", store.used)
	}
}

// An address's lookups of one name under way count once against its
// budget, however many of its requests wait on them (they share one read):
// more than lookupBurst requests from behind one NAT waiting on a key whose
// cache entry just lapsed are all let through. Distinct names are each a
// read, and past lookupBurst of them the address is refused; a name that
// found nothing is charged once, a name found not at all.
func TestTheLookupBudgetCountsANameUnderWayOnce(t *testing.T) {
	l := newLimiter(&fakeQuota{used: map[string]int64{}})
	now := time.Now()
	l.now = func() time.Time { return now }
	b := lookupBudget{l, "203.0.113.9"}
	var dones []func(bool)
	for i := range lookupBurst + 20 {
		done, ok := b.Take("k:app_1")
		if !ok {
			t.Fatalf("request %d waiting on a name under way was refused", i+1)
		}
		dones = append(dones, done)
	}
	for i := range lookupBurst - 1 {
		done, ok := b.Take(fmt.Sprintf("k:other_%d", i))
		if !ok {
			t.Fatalf("distinct name %d of %d refused", i+2, lookupBurst)
		}
		dones = append(dones, done)
	}
	if _, ok := b.Take("k:one_too_many"); ok {
		t.Fatalf("a name past %d under way at once was let through", lookupBurst)
	}
	// The shared name exists: its callers give their take back; the
	// others found nothing and are charged one each.
	for _, done := range dones[:lookupBurst+20] {
		done(true)
	}
	for _, done := range dones[lookupBurst+20:] {
		done(false)
	}
	if done, ok := b.Take("k:after"); !ok {
		t.Fatal("one token left after 49 charges of 50 was refused")
	} else {
		done(false)
	}
	if _, ok := b.Take("k:spent"); ok {
		t.Fatal("a spent budget let a lookup through")
	}
}

// A request refused by one window takes nothing from the other: with 5 a
// minute and 12 an hour, a client that sends 20 requests every minute is
// served 5, 5 and then the hour's last 2, not 5 and then nothing for the
// hour (refusals by the minute used to spend the hour's tokens). The same
// holds failing open, while the database is down.
func TestARefusalByTheMinuteTakesNothingFromTheHour(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("database down %v", down), func(t *testing.T) {
			store := &fakeQuota{used: map[string]int64{}, down: down}
			now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			l := newLimiter(store)
			l.now = func() time.Time { return now }
			served := make([]int, 4)
			for minute := range served {
				now = time.Date(2026, 11, 23, 10, minute, 1, 0, time.UTC)
				for range 20 {
					now = now.Add(100 * time.Millisecond)
					vs := l.project(context.Background(), "proj_w", 5, 12)
					if v, _ := tightest(vs); !v.refused {
						served[minute]++
					}
				}
			}
			if want := []int{5, 5, 2, 0}; fmt.Sprint(served) != fmt.Sprint(want) {
				t.Fatalf("served per minute %v, want %v", served, want)
			}
		})
	}
}
