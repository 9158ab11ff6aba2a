package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/tenancy"
)

// Config of a router instance.
type Config struct {
	// BaseDomain is the domain under which cluster hosts live (api.<domain>,
	// us1.api.<domain> …); requests for other hosts are refused without a lookup.
	BaseDomain string
	// PublicScheme and PublicPort build the base URLs named in wrong_cluster
	// errors: "https" and "" in production, "http" and "8080" in `tally dev`.
	PublicScheme string
	PublicPort   string
	// ManagementURL is where the management service listens.
	ManagementURL string
	// LoopbackHost, when set, is the host a request for a bare loopback
	// host (localhost, 127.0.0.1, ::1, or none) is served as: `tally dev`
	// sets the api cluster's, since many clients cannot resolve
	// *.localhost and Node's fetch drops a Host header.
	LoopbackHost string
	// PublicURLs are the base URLs of clusters served on a port of their
	// own (HandlerFor): a request that came by one is told, in a
	// wrong_cluster error, the port of its project's cluster.
	PublicURLs map[string]string
	// TrustedProxies are the networks whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	IdentitySecret []byte
	// IdentitySecretPrevious, when set, checks download links too (it
	// signs nothing): the regional services make those links with their
	// secret, so during a rotation the router accepts the one it does not
	// sign with.
	IdentitySecretPrevious []byte
	Resolver               *tenancy.Resolver
	// DialTimeout bounds connecting to an upstream (default 500ms), so a
	// cluster that is down answers 503 in well under a second.
	DialTimeout time.Duration
	// BodyLimit is the largest request body forwarded (default "10M").
	BodyLimit string
	Log       *slog.Logger
	Metrics   *telemetry.Metrics
	// PeerLimits, when set, is the region's ring of router replicas that
	// keeps the per-address limits (peerlimit.go; internal/peerlimit starts
	// one); nil, each replica keeps its own.
	PeerLimits ring.Ring
}

// Router is an edge instance.
type Router struct {
	cfg     Config
	echo    *echo.Echo
	handler handler // the chain of steps (chain.go)
	proxies proxies

	refusedOnce sync.Once
	refused     prometheus.Counter
	limits      *limiter
	tokens      dltoken.Keys
}

// New builds a router.
func New(cfg Config) (*Router, error) {
	if cfg.Resolver == nil {
		return nil, errors.New("router: a tenancy resolver is required")
	}
	signer, err := identity.NewSigner(cfg.IdentitySecret)
	if err != nil {
		return nil, err
	}
	if cfg.BaseDomain == "" {
		cfg.BaseDomain = "localhost"
	}
	if cfg.PublicScheme == "" {
		cfg.PublicScheme = "https"
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 500 * time.Millisecond
	}
	if cfg.BodyLimit == "" {
		cfg.BodyLimit = "10M"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Router{cfg: cfg, proxies: proxies(cfg.TrustedProxies), limits: newLimiter(cfg.Resolver),
		tokens: dltoken.New(cfg.IdentitySecret, cfg.IdentitySecretPrevious)}
	r.limits.peers = cfg.PeerLimits
	if cfg.Metrics != nil {
		cfg.Metrics.Register(r.limits.limited, r.limits.failOpen)
		if cfg.PeerLimits != nil {
			cfg.Metrics.Register(cfg.PeerLimits.Collectors()...)
		}
	}
	var management *url.URL
	if cfg.ManagementURL != "" {
		if management, err = url.Parse(cfg.ManagementURL); err != nil {
			return nil, fmt.Errorf("router: management url: %w", err)
		}
	}
	// The order of the steps, written once (chain.go).
	res := cfg.Resolver
	end := &forwardStep{signer: signer, fwd: newForwarder(cfg.DialTimeout), management: management, upstreams: &upstreamCache{},
		oauth: oauthEndpoint{tokens: res, now: r.limits.now}, log: cfg.Log}
	r.handler = chain(end.handle,
		clientStep{proxies: r.proxies, budget: func(ip string) tenancy.LookupBudget { return lookupBudget{r.limits, ip} }},
		hostStep{domain: cfg.BaseDomain, loopback: cfg.LoopbackHost, hosts: res},
		surfaceStep{management: management != nil},
		corsStep{origins: res},
		credentialsStep{keys: res, links: r.tokens},
		clusterStep{clusters: res, scheme: cfg.PublicScheme, port: cfg.PublicPort, publicURLs: cfg.PublicURLs},
		originStep{},
		versionStep{},
		limitStep{limits: r.limits, plans: res},
	)
	e := httpx.New(httpx.Config{Service: "tally-router", Log: cfg.Log, Metrics: cfg.Metrics, BodyLimit: cfg.BodyLimit})
	e.Any("/*", func(c echo.Context) error {
		x := calls.Get().(*call)
		defer func() { *x = call{}; calls.Put(x) }()
		return r.handler(c, x)
	})
	r.echo = e
	return r, nil
}

// calls are the requests' calls, reused: a call holds a project, its key
// and token by value (about a kilobyte), which escapes through the chain's
// closures and cost an allocation per request. Nothing keeps a call past
// its request: the forward streams the whole answer before it returns.
var calls = sync.Pool{New: func() any { return new(call) }}

// Handler serves the public interface.
func (r *Router) Handler() http.Handler { return r.echo }

// PublicOptions are the deadlines and per-address connection cap of the
// router's listeners (httpx.ServePublic): trusted proxies are not capped,
// and the connections closed at the cap are counted on the router's
// metrics (tally_connections_refused_total).
func (r *Router) PublicOptions() httpx.PublicOptions {
	o := httpx.PublicOptions{Exempt: r.proxies.contain}
	if r.cfg.Metrics != nil {
		r.refusedOnce.Do(func() {
			r.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_connections_refused_total",
				Help: "Connections closed as soon as accepted: their client address held the most open connections allowed."})
			r.cfg.Metrics.Register(r.refused)
		})
		o.Refused = r.refused
	}
	return o
}

// HandlerFor serves the public interface as the host host, whatever Host
// a request names: a cluster on a port of its own, reachable by clients
// that cannot resolve its host name or send a Host header.
func (r *Router) HandlerFor(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req = req.WithContext(context.WithValue(req.Context(), fixedHostKey{}, host))
		r.echo.ServeHTTP(w, req)
	})
}

// Ready is the router's readiness (tenancy.Resolver.Ready): the directory's
// schema as new as this binary needs, and the directory readable or read
// within the last few minutes, whose caches serve while it is down.
func (r *Router) Ready(ctx context.Context) error { return r.cfg.Resolver.Ready(ctx) }

// resolverError answers a directory lookup that failed for other reasons
// than the name: the caller's lookup budget spent (429), or the directory
// unreachable (503).
func resolverError(err error) error {
	if errors.Is(err, tenancy.ErrLookupsSpent) {
		e := tooMany()
		e.Details = "Too many requests from this address named keys, tokens or hosts that do not exist; try again in a second."
		e.Header = http.Header{"Retry-After": {"1"}}
		return e
	}
	e := apierr.Unavailable("The platform directory cannot be reached; try again shortly.")
	e.Cause = err
	return e
}
