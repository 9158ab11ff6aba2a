// Package peerlimit keeps per-address counters central to a region's
// router replicas: each replica embeds a gubernator instance
// (github.com/gubernator-io/gubernator/v2), the replicas of one region form
// its peer ring, and consistent hashing makes one replica the owner of each
// counter, which every other replica asks (README "Rate limits").
//
// A replica sends each check to the counter's owner alone (NO_BATCHING:
// 0.2-0.5 ms a check on loopback, where gubernator's batches took
// 1.3-1.5 ms), and the owner's answer is exact. GLOBAL is not used: it
// answers from the asking replica's copy and sends the hits to the owner
// afterwards (every 100 ms at best), so with limits of a few requests,
// such as 5 per 5 s, N replicas would still let through about N times the
// limit in a burst, which is what this package removes.
//
// When the owner cannot be reached within Deadline (20 ms by default), the
// replica decides the check on its own share of the limit (the limit
// divided by the ring's size, rounded up, in a local bucket) and counts it
// in tally_ratelimit_peer_fail_open_total.
package peerlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	guber "github.com/gubernator-io/gubernator/v2"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/lrux"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
)

// Config of a replica's limiter.
type Config struct {
	// Addr is where the replica listens for its peers (gubernator's gRPC
	// service), e.g. ":7070" or "127.0.0.1:0".
	Addr string
	// Advertise is the address the other replicas reach this one at, as it
	// appears in the peer list (default: Addr, its host, when unspecified,
	// this machine's first non-loopback address).
	Advertise string
	// Discovery: at most one of Peers (a static list of host:port, this
	// replica's included or not), DNS (name:port, every address the name
	// resolves to, looked up again every DNSInterval) and K8s (the router
	// pods, from the Kubernetes API: see K8s). None: a ring of one until
	// SetPeers is called.
	Peers       []string
	DNS         string
	DNSInterval time.Duration // default 5s
	K8s         *K8s
	// Deadline bounds a check's wait on a peer (default 20ms), past which
	// the replica decides on its own share.
	Deadline time.Duration
	// CacheSize is the most counters a replica owns (default 100,000).
	CacheSize int
	Log       *slog.Logger
}

// Limiter is a replica's member of the ring.
type Limiter struct {
	cfg      Config
	inst     *guber.V1Instance
	srv      *grpc.Server
	lis      net.Listener
	self     string
	ringSize atomic.Int64
	local    *lru.Cache[string, *rate.Limiter]
	failOpen *prometheus.CounterVec
	log      *slog.Logger
	stop     context.CancelFunc
	done     sync.WaitGroup
	k8s      *k8sRing
	ring     prometheus.Gauge
	setMu    sync.Mutex // one SetPeers at a time: gubernator's is not safe against itself
	closed   atomic.Bool
	warned   atomic.Int64 // unix seconds of the last fail-open warning
}

// Start opens the peer listener and joins the ring.
func Start(ctx context.Context, cfg Config) (*Limiter, error) {
	if cfg.Deadline <= 0 {
		cfg.Deadline = 20 * time.Millisecond
	}
	if cfg.DNSInterval <= 0 {
		cfg.DNSInterval = 5 * time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 100_000
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	n := 0
	for _, set := range []bool{len(cfg.Peers) > 0, cfg.DNS != "", cfg.K8s != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("peerlimit: give one of a static peer list, a DNS name and Kubernetes discovery")
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("peerlimit: listen on %s: %w", cfg.Addr, err)
	}
	self, err := advertised(cfg, lis.Addr().(*net.TCPAddr))
	if err != nil {
		lis.Close()
		return nil, err
	}
	// gubernator logs through logrus; what it says of unreachable peers,
	// once per check, is told here once a second instead (see take).
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(1 << 20))
	inst, err := guber.NewV1Instance(guber.Config{
		GRPCServers:   []*grpc.Server{srv},
		InstanceID:    self,
		AdvertiseAddr: self,
		CacheSize:     cfg.CacheSize,
		Logger:        quiet.WithField("category", "gubernator"),
		// xxhash rather than gubernator's default fnv1, whose hashes of
		// keys that differ in their last byte (203.0.113.7, 203.0.113.8)
		// land next to each other on the ring: one owner for a whole /24.
		LocalPicker: guber.NewReplicatedConsistentHash(xxhash.Sum64String, 512),
		Behaviors: guber.BehaviorConfig{
			BatchTimeout: cfg.Deadline,
			// Every check is sent alone (NO_BATCHING): see Take.
			DisableBatching: true,
		},
	})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("peerlimit: %w", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &Limiter{cfg: cfg, inst: inst, srv: srv, lis: lis, self: self, log: cfg.Log, stop: stop,
		local: lrux.New[string, *rate.Limiter](100_000),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_ratelimit_peer_fail_open_total",
			Help: "Per-address limit checks this replica decided on its own share of the limit: the counter's owner in the ring could not be reached within the deadline."},
			[]string{"limit"}),
		ring: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tally_ratelimit_peers",
			Help: "Replicas in this replica's ring of per-address limits, itself included (1: it keeps every counter alone)."}),
	}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		_ = srv.Serve(lis)
	}()
	l.SetPeers(nil) // a ring of one until discovery answers
	switch {
	case len(cfg.Peers) > 0:
		l.SetPeers(cfg.Peers)
	case cfg.DNS != "":
		if err := l.resolve(rctx); err != nil {
			cfg.Log.Warn("peer discovery: the DNS name does not resolve yet; a ring of one meanwhile", "name", cfg.DNS, "err", err)
		}
		l.done.Add(1)
		go l.watchDNS(rctx)
	case cfg.K8s != nil:
		if err := l.startK8s(rctx, *cfg.K8s); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// advertised is the address the replica is named by in the ring.
func advertised(cfg Config, bound *net.TCPAddr) (string, error) {
	if cfg.Advertise != "" {
		return cfg.Advertise, nil
	}
	if cfg.K8s != nil && cfg.K8s.PodIP != "" {
		return net.JoinHostPort(cfg.K8s.PodIP, fmt.Sprint(bound.Port)), nil
	}
	if !bound.IP.IsUnspecified() {
		return bound.String(), nil
	}
	s, err := guber.ResolveHostIP(bound.String())
	if err != nil {
		return "", fmt.Errorf("peerlimit: this replica's address: %w (give it as the advertised address)", err)
	}
	return s, nil
}

// Addr is the address this replica is known by in the ring.
func (l *Limiter) Addr() string { return l.self }

// Collectors are the limiter's metrics: the fail-open counter, the ring's
// size (tally_ratelimit_peers) and gubernator's own (gubernator_*).
func (l *Limiter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{l.failOpen, l.ring, l.inst}
}

// FailedOpen is how many checks of the limit named name were decided on
// the replica's own share.
func (l *Limiter) FailedOpen(name string) float64 {
	var m dto.Metric
	_ = l.failOpen.WithLabelValues(name).Write(&m)
	return m.GetCounter().GetValue()
}

// SetPeers sets the ring to addrs (host:port), this replica added when
// missing. Counters whose owner changes start afresh on their new owner.
func (l *Limiter) SetPeers(addrs []string) {
	addrs = append(slices.Clone(addrs), l.self)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	l.setMu.Lock()
	defer l.setMu.Unlock()
	l.setPeersLocked(addrs)
}

// setPeersLocked sets the ring to addrs, sorted, this replica among them;
// l.setMu is held.
func (l *Limiter) setPeersLocked(addrs []string) {
	peers := make([]guber.PeerInfo, len(addrs))
	for i, a := range addrs {
		peers[i] = guber.PeerInfo{GRPCAddress: a, IsOwner: a == l.self}
	}
	l.inst.SetPeers(peers)
	l.ringSize.Store(int64(len(peers)))
	l.ring.Set(float64(len(peers)))
	l.warm()
}

// warm opens the connections to the ring's other replicas (a check with no
// hits to each, waited on for at most two seconds), so that the first
// checks they are sent do not pay for a connection within their deadline.
func (l *Limiter) warm() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range l.inst.GetPeerList() {
		if p.Info().IsOwner {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = p.GetPeerRateLimits(ctx, &guber.GetPeerRateLimitsReq{Requests: []*guber.RateLimitReq{{
				Name: "warm", UniqueKey: l.self, Limit: 1, Duration: 1000, Algorithm: guber.Algorithm_LEAKY_BUCKET}}})
		}()
	}
	wg.Wait()
}

// Ready fails while the ring is not known yet: with Kubernetes discovery,
// until the router pods have been listed once (a replica serving before
// would keep every counter alone). Static and DNS rings are always ready
// (a DNS name that does not resolve yet is a ring of one, warned).
func (l *Limiter) Ready() error {
	if l.k8s != nil && !l.k8s.synced.Load() {
		return errors.New("peer discovery: the router pods are not listed yet from the Kubernetes API")
	}
	return nil
}

// Size is how many replicas this replica's ring holds, itself included,
// without listing them.
func (l *Limiter) Size() int { return int(max(l.ringSize.Load(), 1)) }

// Peers is the ring as this replica sees it.
func (l *Limiter) Peers() []string {
	var out []string
	for _, p := range l.inst.GetPeerList() {
		out = append(out, p.Info().GRPCAddress)
	}
	slices.Sort(out)
	return out
}

func (l *Limiter) watchDNS(ctx context.Context) {
	defer l.done.Done()
	clock.Every(ctx, l.cfg.DNSInterval, func(err error) {
		l.log.Warn("peer discovery: DNS lookup failed; the ring is kept as it was", "name", l.cfg.DNS, "err", err)
	}, l.resolve)
}

// resolve sets the ring to the addresses the DNS name has now (a headless
// Service's name: one address per ready pod).
func (l *Limiter) resolve(ctx context.Context) error {
	host, port, err := net.SplitHostPort(l.cfg.DNS)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(lctx, host)
	if err != nil {
		return err
	}
	var addrs []string
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	if changed := l.setPeersIfChanged(addrs); changed != nil {
		l.log.Info("peer discovery: the ring changed", "peers", changed)
	}
	return nil
}

// StopServingPeers closes the peer listener while the replica stays in the
// ring and keeps checking its own counters: what its peers see of a
// replica cut off from them (a partition, a blocked port).
func (l *Limiter) StopServingPeers() { l.srv.Stop() }

// Close leaves the ring: the listener closes and the counters this replica
// owned are gone (their addresses start afresh on their next owner).
func (l *Limiter) Close() {
	if !l.closed.CompareAndSwap(false, true) {
		return
	}
	l.stop()
	l.srv.Stop()
	l.done.Wait()
	_ = l.inst.Close()
}

// Bucket and Result are the ring's contract's (internal/peerlimit/ring),
// which the router and the development stack import without this
// package's dependencies.
type (
	Bucket = ring.Bucket
	Result = ring.Result
)

// Take takes hits tokens of key's bucket (a negative hits gives tokens
// back, up to the burst) at the counter's owner; past the deadline, on
// this replica's share.
func (l *Limiter) Take(ctx context.Context, b Bucket, key string, hits int64) Result {
	now := time.Now()
	created := now.UnixMilli()
	req := &guber.RateLimitReq{Name: b.Name, UniqueKey: key, Hits: hits, Limit: b.Rate, Burst: b.Burst,
		Duration: b.Per.Milliseconds(), Algorithm: guber.Algorithm_LEAKY_BUCKET, CreatedAt: &created,
		Metadata: map[string]string{}}
	resp, why := l.check(req)
	if resp != nil {
		res := Result{Allowed: resp.Status == guber.Status_UNDER_LIMIT, Remaining: resp.Remaining, Reset: time.UnixMilli(resp.ResetTime)}
		if !res.Allowed { // when the next token comes
			res.Reset = now.Add(time.Duration(float64(b.Per) / float64(b.Rate)))
		}
		return res
	}
	if l.closed.Load() {
		why = "this replica left the ring"
	}
	return l.share(b, key, hits, now, why)
}

// check asks gubernator; an answer is nil with why it is missing.
func (l *Limiter) check(req *guber.RateLimitReq) (*guber.RateLimitResp, string) {
	// Not the request's context, whose end (a client hanging up) is no
	// peer's failure.
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Deadline)
	defer cancel()
	// A counter another replica owns is asked of it straight from this
	// goroutine: GetRateLimits would start a goroutine per check to ask it
	// and wait on a channel, a hand-off that added to the p99 of every
	// request on a busy machine. A counter of this replica's own goes
	// through GetRateLimits, which applies it here.
	if peer, err := l.inst.GetPeer(ctx, req.Name+"_"+req.UniqueKey); err == nil && !peer.Info().IsOwner {
		resp, err := peer.GetPeerRateLimit(ctx, req)
		switch {
		case err != nil:
			return nil, err.Error()
		case resp == nil:
			return nil, "no answer"
		case resp.Error != "":
			return nil, resp.Error
		}
		return resp, ""
	}
	resp, err := l.inst.GetRateLimits(ctx, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{req}})
	switch {
	case err != nil:
		return nil, err.Error()
	case len(resp.Responses) != 1 || resp.Responses[0] == nil:
		return nil, "no answer"
	case resp.Responses[0].Error != "":
		return nil, resp.Responses[0].Error
	}
	return resp.Responses[0], ""
}

// share decides a check on this replica's share of the bucket: the rate
// and burst divided by the ring's size, rounded up.
func (l *Limiter) share(b Bucket, key string, hits int64, now time.Time, why string) Result {
	l.failOpen.WithLabelValues(b.Name).Inc()
	if last := l.warned.Load(); now.Unix() > last && l.warned.CompareAndSwap(last, now.Unix()) {
		l.log.Warn("a rate limit's owner in the ring did not answer in time: deciding on this replica's share",
			"limit", b.Name, "err", why)
	}
	n := max(l.ringSize.Load(), 1)
	r := int64(math.Ceil(float64(b.Rate) / float64(n)))
	burst := int64(math.Ceil(float64(b.Burst) / float64(n)))
	lim := lrux.GetOrAdd(l.local, b.Name+"\x00"+key+"\x00"+fmt.Sprint(r, "/", b.Per, "/", burst), func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(float64(r)/b.Per.Seconds()), int(burst))
	})
	if hits <= 0 {
		if hits < 0 {
			lim.AllowN(now, int(hits)) // gives back, capped at the burst by the next take
		}
		return Result{Allowed: true, Remaining: int64(lim.TokensAt(now)), Reset: now, FailedOpen: true}
	}
	res := lim.ReserveN(now, int(hits))
	if d := res.DelayFrom(now); !res.OK() || d > 0 {
		res.CancelAt(now)
		return Result{Remaining: 0, Reset: now.Add(max(d, time.Second)), FailedOpen: true}
	}
	left := lim.TokensAt(now)
	return Result{Allowed: true, Remaining: int64(left), FailedOpen: true,
		Reset: now.Add(time.Duration((float64(burst) - left) / float64(r) * float64(b.Per)))}
}

var _ ring.Member = (*Limiter)(nil)

// StartMember is Start as a ring.Start: a member listening on addr that is
// told its peers (SetPeers), as the development stack's replicas are.
func StartMember(ctx context.Context, addr string, deadline time.Duration, log *slog.Logger) (ring.Member, error) {
	return Start(ctx, Config{Addr: addr, Deadline: deadline, Log: log})
}
