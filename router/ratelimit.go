package router

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/lrux"
	"github.com/tallyhq/tally/tenancy"
)

// The limits the router enforces (docs: README, Rate limits):
//
//   - per project on the application API, per minute and per hour, from the
//     project's plan. Every replica hands out requests from quota it leases
//     from the project's window row in the tenancy database (LeaseQuota), so
//     the sum over replicas never passes the limit and no request writes to
//     the database: a replica leases about a second of its own traffic at a
//     time. When the database cannot be reached, a replica keeps serving on
//     its share of the window (what its leases were of the window's use so
//     far, all of it before any lease) and counts the requests so let
//     through in tally_ratelimit_fail_open_total; its next lease, once the
//     database answers, charges them to the window's row.
//   - per client address on the client-side API (/client/v1/…), a project
//     setting (default 5 per 5 s): a token bucket per project and address,
//     kept by the region's ring of replicas (peerlimit.go) or, without
//     one, on each replica.
//   - per client address on every route, its directory lookups of names
//     that do not exist (an unknown key id, token or host, each a database
//     query): lookupBurst, then lookupRate a second, on the ring or each
//     replica. Past
//     that, the address's lookups of names that no cache holds are refused
//     with 429 and no query (tenancy.LookupBudget); names cached, such as
//     its own keys' while they stay cached, still resolve.

// quota is where replicas lease a project's requests.
type quota interface {
	LeaseQuota(ctx context.Context, projectID string, window time.Duration, start time.Time, want, limit int64) (int64, int64, error)
	DropRateWindows(ctx context.Context, cutoff time.Time) error
}

type windowKey struct {
	project string
	length  time.Duration
}

// window is a replica's view of one project window.
type window struct {
	mu          sync.Mutex
	start       time.Time
	first       time.Time // this replica's first request in the window
	local       int64     // leased and not handed out yet
	granted     int64     // leased by this replica in the window
	taken       int64     // handed out by this replica in the window
	centralUsed int64     // the window's use over all replicas at the last lease
	spent       bool      // a lease got nothing: refuse until the window ends
	lastWant    int64     // the size of the last lease asked
	refilling   bool      // a lease is being taken in the background
	owed        int64     // let through failing open, not yet charged to the window's row
}

// credit adds a lease to the window: what it granted pays first for the
// requests let through failing open, and the rest is handed out.
func (w *window) credit(granted, used int64) {
	paid := min(granted, w.owed)
	w.owed -= paid
	w.local += granted - paid
	w.granted += granted
	w.centralUsed = max(w.centralUsed, used)
	w.spent = granted == 0
}

type limiter struct {
	store    quota
	now      func() time.Time
	windows  sync.Map // windowKey → *window: two per project, reset in place as windows pass
	clients  *lru.Cache[string, *rate.Limiter]
	lookups  *lru.Cache[string, *addrLookups] // by addrKey
	limited  *prometheus.CounterVec
	failOpen prometheus.Counter
	peers    peerRing // the region's ring, keeping the per-address limits (peerlimit.go); nil: each replica its own
	leases   *lru.Cache[string, *lease]
	dropMu   sync.Mutex
	dropped  time.Time
}

func newLimiter(store quota) *limiter {
	return &limiter{
		store:   store,
		now:     time.Now,
		clients: lrux.New[string, *rate.Limiter](200_000),
		lookups: lrux.New[string, *addrLookups](100_000),
		leases:  lrux.New[string, *lease](200_000),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_rate_limited_total",
			Help: "Requests refused with 429, by the limit they met (project_minute, project_hour, client_ip, directory_lookups)."}, []string{"limit"}),
		failOpen: prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_ratelimit_fail_open_total",
			Help: "Requests let through on a replica's local share while the tenancy database could not be reached."}),
	}
}

// verdict is what a limit says of one request, and what the headers show.
type verdict struct {
	name      string // "minute", "hour", or "client"
	limit     int64
	window    time.Duration
	remaining int64
	reset     time.Time // when the window (or, for a client, the next token) comes
	refused   bool
}

// project takes one request of the project's plan limits, hour first,
// then minute. A request refused by one window takes nothing from the
// other: a refusal by the minute gives the hour's token back, so a client
// that retries through a minute's throttle does not spend its hour. The
// verdict shown is the tighter window's.
func (l *limiter) project(ctx context.Context, projectID string, perMinute, perHour int64) []verdict {
	var out []verdict
	var undo [2]taking // what each window let through, to give back (no allocation per request)
	for _, w := range []struct {
		name   string
		length time.Duration
		limit  int64
	}{{"hour", time.Hour, perHour}, {"minute", time.Minute, perMinute}} {
		if w.limit <= 0 {
			continue
		}
		v, took := l.take(ctx, projectID, w.name, w.length, w.limit)
		if v.refused {
			l.limited.WithLabelValues("project_" + w.name).Inc()
			for i := range out {
				undo[i].giveBack()
				out[i].remaining++
			}
			out = append(out, v)
			break
		}
		undo[len(out)] = took
		out = append(out, v)
	}
	l.dropOld(ctx)
	return out
}

// taking is a request a window let through, which giveBack returns to it
// when another window refuses the request.
type taking struct {
	w          *window
	start      time.Time // the window's
	failedOpen bool      // let through on the replica's share, and owed to the window's row
}

// take takes one request of a window; a request it lets through comes with
// its taking.
func (l *limiter) take(ctx context.Context, projectID, name string, length time.Duration, limit int64) (verdict, taking) {
	now := l.now()
	start := now.Truncate(length)
	key := windowKey{projectID, length}
	wv, ok := l.windows.Load(key)
	if !ok {
		wv, _ = l.windows.LoadOrStore(key, &window{})
	}
	w := wv.(*window)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.start.Equal(start) { // a new window: what was left of the last is gone
		w.start, w.first, w.local, w.granted, w.taken, w.centralUsed, w.spent, w.owed = start, now, 0, 0, 0, 0, false, 0
	}
	v := verdict{name: name, limit: limit, window: length, reset: start.Add(length)}
	remaining := func() int64 { return max(0, limit-w.centralUsed+w.local) }
	if w.local == 0 && !w.spent {
		// About a second of this replica's traffic (since its first request
		// of the window: an hour's window may have begun long before), at
		// least one request and at most a twentieth of the limit.
		elapsed := max(now.Sub(w.first).Seconds(), 1)
		want := int64(math.Ceil(float64(w.taken) / elapsed))
		want = min(max(want, 1), max(limit/20, 1))
		w.lastWant = want
		// The requests let through while the database was away are
		// leased too, so that the window's row counts them.
		// On the request's values but not its cancellation: a client that
		// hung up is no database failure, and the lease serves the
		// window's other requests. A database slower than leaseTimeout
		// counts as away.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
		granted, used, err := l.store.LeaseQuota(lctx, projectID, length, start, want+w.owed, limit)
		cancel()
		if err != nil {
			// Fail open on this replica's share of the window.
			share := limit
			if w.centralUsed > 0 {
				share = int64(math.Ceil(float64(limit) * float64(w.granted) / float64(w.centralUsed)))
			}
			if w.taken < share {
				w.taken++
				w.owed++
				l.failOpen.Inc()
				v.remaining = max(0, share-w.taken)
				return v, taking{w, start, true}
			}
			v.refused = true
			return v, taking{}
		}
		w.credit(granted, used)
	}
	if w.local == 0 {
		v.refused = true
		return v, taking{}
	}
	w.local--
	w.taken++
	v.remaining = remaining()
	// A busy window takes its next lease in the background when a quarter
	// of the last is left, so that its requests do not wait on the lease's
	// round trip (the window's lock is held through a blocking lease).
	if w.lastWant >= 8 && !w.spent && !w.refilling && w.local <= w.lastWant/4 {
		w.refilling = true
		go l.refill(w, projectID, length, start, w.lastWant, limit)
	}
	return v, taking{w, start, false}
}

// giveBack returns the request to its window, to be handed out again; a
// window that has passed since takes nothing back.
func (t taking) giveBack() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.start.Equal(t.start) {
		return
	}
	w.taken--
	if t.failedOpen {
		w.owed = max(0, w.owed-1)
	} else {
		w.local++
	}
}

// refill leases more of a window in the background (see take).
// leaseTimeout bounds a lease taken while requests wait on it (the window's
// lock is held), after which the replica fails open.
const leaseTimeout = 2 * time.Second

func (l *limiter) refill(w *window, projectID string, length time.Duration, start time.Time, want, limit int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	granted, used, err := l.store.LeaseQuota(ctx, projectID, length, start, want, limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refilling = false
	if err != nil || !w.start.Equal(start) {
		return // the next blocking lease tries again; another window's quota is void
	}
	w.credit(granted, used)
}

// dropOld deletes windows over two hours old, access tokens a day past
// their expiry and directory change records older than
// tenancy.ChangesKept, at most every five minutes per replica (a double
// delete by two replicas is harmless). Each sweep deletes in batches
// (db.Sweep) for at most dropFor; what is left waits for the next round.
func (l *limiter) dropOld(ctx context.Context) {
	now := l.now()
	l.dropMu.Lock()
	due := now.Sub(l.dropped) > 5*time.Minute
	if due {
		l.dropped = now
	}
	l.dropMu.Unlock()
	if due {
		go func() {
			drop := func(f func(ctx context.Context) error) {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropFor)
				defer cancel()
				_ = f(dctx)
			}
			drop(func(ctx context.Context) error { return l.store.DropRateWindows(ctx, now.Add(-2*time.Hour)) })
			if t, ok := l.store.(interface {
				DropExpiredTokens(context.Context, time.Time) error
			}); ok {
				// A day of expired tokens answers introspection.
				drop(func(ctx context.Context) error { return t.DropExpiredTokens(ctx, now.Add(-24*time.Hour)) })
			}
			if c, ok := l.store.(interface {
				PruneChanges(context.Context, time.Duration) error
			}); ok {
				drop(func(ctx context.Context) error { return c.PruneChanges(ctx, tenancy.ChangesKept) })
			}
		}()
	}
}

// dropFor bounds each of dropOld's sweeps: together far less than the five
// minutes between rounds, so two rounds of a replica never overlap.
const dropFor = 30 * time.Second

// client takes one request of a client address's bucket.
func (l *limiter) client(projectID, ip string, lim tenancy.IPLimit) verdict {
	if lim.Requests <= 0 || lim.Seconds <= 0 {
		return verdict{}
	}
	if l.peers != nil {
		return l.clientCentral(projectID, ip, lim)
	}
	key := projectID + "|" + addrKey(ip) + "|" + strconv.Itoa(lim.Requests) + "/" + strconv.Itoa(lim.Seconds)
	b := lrux.GetOrAdd(l.clients, key, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(float64(lim.Requests)/float64(lim.Seconds)), lim.Requests)
	})
	now := l.now()
	v := verdict{name: "client", limit: int64(lim.Requests), window: time.Duration(lim.Seconds) * time.Second}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		v.refused, v.reset = true, now.Add(d)
		l.limited.WithLabelValues("client_ip").Inc()
		return v
	}
	v.remaining = int64(b.TokensAt(now))
	v.reset = now.Add(time.Duration(float64(v.limit-v.remaining) / float64(lim.Requests) * float64(v.window)))
	return v
}

// A client address may make lookupBurst directory lookups of names that
// do not exist at once, then lookupRate a second. A client that sends a
// wrong key again and again is charged once per negative-cache lifetime
// (2 s), far below it.
const (
	lookupRate  = 10
	lookupBurst = 50
)

// lookupBudget is a client address's tenancy.LookupBudget. The address
// is keyed only when a lookup misses the caches, off the hot path.
type lookupBudget struct {
	l  *limiter
	ip string
}

// addrLookups is one address's budget: a token bucket, less the names
// being looked up, so that concurrent lookups cannot spend a token each
// before the first is charged. A name under way is counted once, however
// many of the address's requests wait on it: they share its one read
// (the resolver's), and its charge. Without that, more than lookupBurst
// requests from one address (a NAT, a busy backend) waiting on a key
// whose cache entry had just lapsed were refused, though the key exists.
type addrLookups struct {
	mu     sync.Mutex
	bucket *rate.Limiter
	names  map[string]*nameLookup
}

// nameLookup is one name under way: the requests waiting on it, and
// whether it found nothing.
type nameLookup struct {
	callers int
	missed  bool
}

func (b lookupBudget) Take(name string) (func(found bool), bool) {
	if b.l.peers != nil {
		return b.takeCentral(name)
	}
	a := lrux.GetOrAdd(b.l.lookups, addrKey(b.ip), func() *addrLookups {
		return &addrLookups{bucket: rate.NewLimiter(lookupRate, lookupBurst)}
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.names[name]
	if n == nil {
		if a.bucket.TokensAt(b.l.now())-float64(len(a.names)) < 1 {
			b.l.limited.WithLabelValues("directory_lookups").Inc()
			return nil, false
		}
		if a.names == nil {
			a.names = map[string]*nameLookup{}
		}
		n = &nameLookup{}
		a.names[name] = n
	}
	n.callers++
	return func(found bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		n.missed = n.missed || !found
		if n.callers--; n.callers > 0 {
			return
		}
		delete(a.names, name)
		if n.missed {
			// Kept even past empty (the bucket owes it): lookups that
			// overlapped are all paid for.
			a.bucket.ReserveN(b.l.now(), 1)
		}
	}, true
}

// addrKey is what a client address's bucket is kept by (httpx.ClientKey),
// any port a proxy appended dropped. Text that is no address is kept as
// it came.
func addrKey(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return s
		}
		a = ap.Addr()
	}
	k := httpx.ClientKey(a)
	if k.Is6() {
		return netip.PrefixFrom(k, 64).String()
	}
	return k.String()
}

// tightest is the verdict the headers show: a refusal, or the window with
// the fewest requests left.
func tightest(vs []verdict) (verdict, bool) {
	var best verdict
	found := false
	for _, v := range vs {
		if v.limit == 0 {
			continue
		}
		if !found || v.refused || (!best.refused && v.remaining < best.remaining) {
			best, found = v, true
			if v.refused {
				break
			}
		}
	}
	return best, found
}

// setHeaders writes the limits' headers on a response: the ones existing
// SDKs read (X-Rate-Limit-*, Retry as Unix seconds) and the IETF draft's
// RateLimit-Policy and RateLimit (reset in seconds from now).
func setHeaders(h http.Header, vs []verdict, now time.Time) {
	v, ok := tightest(vs)
	if !ok {
		return
	}
	h["X-Rate-Limit-Limit"] = one(strconv.FormatInt(v.limit, 10))
	h["X-Rate-Limit-Remaining"] = one(strconv.FormatInt(v.remaining, 10))
	retry := now
	if v.remaining == 0 || v.refused {
		retry = v.reset
	}
	h["X-Rate-Limit-Retry"] = one(strconv.FormatInt(int64(math.Ceil(float64(retry.UnixNano())/1e9)), 10))
	policy := make([]byte, 0, 64)
	for _, x := range vs {
		if x.limit == 0 {
			continue
		}
		if len(policy) > 0 {
			policy = append(policy, ", "...)
		}
		policy = append(policy, '"')
		policy = append(policy, x.name...)
		policy = append(policy, `";q=`...)
		policy = strconv.AppendInt(policy, x.limit, 10)
		policy = append(policy, ";w="...)
		policy = strconv.AppendInt(policy, int64(x.window/time.Second), 10)
	}
	h["Ratelimit-Policy"] = one(string(policy))
	h["Ratelimit"] = one(`"` + v.name + `";r=` + strconv.FormatInt(v.remaining, 10) + ";t=" + strconv.FormatInt(secondsUntil(now, v.reset), 10))
	if v.refused {
		h.Set("Retry-After", strconv.FormatInt(secondsUntil(now, v.reset), 10))
	}
}

// one is a header's value list of v: the fields above are set by their
// canonical names (what Header.Set would make of them) straight into the
// map, sparing the canonicalisation of five names on every response.
func one(v string) []string { return []string{v} }

func secondsUntil(now, t time.Time) int64 {
	return max(int64(math.Ceil(t.Sub(now).Seconds())), 0)
}

// tooMany is the interface's 429.
func tooMany() *apierr.Error {
	return &apierr.Error{Status: http.StatusTooManyRequests, Key: "too_many_requests",
		Message: "Too many requests hit the API too quickly."}
}
