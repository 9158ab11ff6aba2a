package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/peerlimit"
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
	// keeps the per-address limits (peerlimit.go); nil, each replica keeps
	// its own.
	PeerLimits *peerlimit.Limiter
}

// Router is an edge instance.
type Router struct {
	cfg        Config
	echo       *echo.Echo
	signer     *identity.Signer
	fwd        *forwarder
	management *url.URL
	upstreams  upstreamCache

	refusedOnce sync.Once
	refused     prometheus.Counter
	limits      *limiter
	tokens      dltoken.Keys
}

const (
	clientPrefix      = "/client/"
	ctxForwardedFor   = "tally.forwarded_for"
	ctxForwardedProto = "tally.forwarded_proto"
	managementPrefix  = "/management/"
)

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
	r := &Router{cfg: cfg, signer: signer, fwd: newForwarder(cfg.DialTimeout), limits: newLimiter(cfg.Resolver),
		tokens: dltoken.New(cfg.IdentitySecret, cfg.IdentitySecretPrevious)}
	r.limits.peers = cfg.PeerLimits
	if cfg.Metrics != nil {
		cfg.Metrics.Register(r.limits.limited, r.limits.failOpen)
		if cfg.PeerLimits != nil {
			cfg.Metrics.Register(cfg.PeerLimits.Collectors()...)
		}
	}
	if cfg.ManagementURL != "" {
		if r.management, err = url.Parse(cfg.ManagementURL); err != nil {
			return nil, fmt.Errorf("router: management url: %w", err)
		}
	}
	e := httpx.New(httpx.Config{Service: "tally-router", Log: cfg.Log, Metrics: cfg.Metrics, BodyLimit: cfg.BodyLimit})
	e.Any("/*", r.handle)
	r.echo = e
	return r, nil
}

// Handler serves the public interface.
func (r *Router) Handler() http.Handler { return r.echo }

// PublicOptions are the deadlines and per-address connection cap of the
// router's listeners (httpx.ServePublic): trusted proxies are not capped,
// and the connections closed at the cap are counted on the router's
// metrics (tally_connections_refused_total).
func (r *Router) PublicOptions() httpx.PublicOptions {
	o := httpx.PublicOptions{Exempt: func(a netip.Addr) bool { return r.trustedAddr(a) }}
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

type fixedHostKey struct{}

// hostOf is the host a request is served as.
func (r *Router) hostOf(req *http.Request) string {
	if h, ok := req.Context().Value(fixedHostKey{}).(string); ok {
		return h
	}
	host := hostOnly(req.Host)
	if r.cfg.LoopbackHost != "" {
		switch host {
		case "", "localhost", "127.0.0.1", "[::1]", "::1":
			return r.cfg.LoopbackHost
		}
	}
	return host
}

// Ready is the router's readiness (tenancy.Resolver.Ready): the directory's
// schema as new as this binary needs, and the directory readable or read
// within the last few minutes, whose caches serve while it is down.
func (r *Router) Ready(ctx context.Context) error { return r.cfg.Resolver.Ready(ctx) }

func (r *Router) handle(c echo.Context) error {
	req := c.Request()
	clientIP, priorChain, proto := r.clientIP(req)
	// Every directory lookup of the request draws on its address's budget
	// of lookups that find nothing (see lookupBudget).
	req = req.WithContext(tenancy.WithLookupBudget(req.Context(), lookupBudget{r.limits, clientIP}))
	c.SetRequest(req)
	if priorChain != "" {
		c.Set(ctxForwardedFor, priorChain)
	}
	if proto != "" {
		c.Set(ctxForwardedProto, proto)
	}
	host := r.hostOf(req)
	if !r.inDomain(host) {
		return unknownHost(host)
	}
	cluster, hostKind, err := r.cfg.Resolver.Host(req.Context(), host)
	if errors.Is(err, tenancy.ErrUnknownHost) {
		return unknownHost(host)
	}
	if err != nil {
		return resolverError(err)
	}
	requestID := c.Response().Header().Get(apierr.HeaderRequestID)
	expires := time.Now().Add(identity.TTL)

	if strings.HasPrefix(req.URL.Path, managementPrefix) && hostKind == tenancy.APIHost {
		if r.management == nil {
			return apierr.Unavailable("The management service is not configured on this router.")
		}
		mid := req.Header.Get("X-Management-Id")
		key, err := r.cfg.Resolver.Management(req.Context(), mid, req.Header.Get("X-Management-Token"))
		if err != nil {
			return credentialError(err, "Send valid X-Management-Id and X-Management-Token headers.")
		}
		signed := r.signer.Sign(identity.Identity{Audience: identity.AudienceManagement, Cluster: cluster.Name,
			Method: req.Method, Path: upstreamPath(r.management, req), Query: req.URL.RawQuery, Kind: identity.KindManagement, KeyID: key.ID,
			RequestID: requestID, Expires: expires})
		return r.fwd.forward(c, r.management, "management service", signed, clientIP)
	}

	if strings.HasPrefix(req.URL.Path, oauthPrefix) && hostKind == tenancy.APIHost {
		return r.oauth(c, cluster)
	}
	clientAPI := strings.HasPrefix(req.URL.Path, clientPrefix)
	exportID, isExport := exportOf(req)
	if hostKind == tenancy.DownloadHost && !isExport {
		return notOnDownloadHost(req)
	}
	var origin string
	if clientAPI {
		origin = req.Header.Get("Origin")
		if done, err := r.clientCORS(c, cluster.Name, origin); done {
			return err
		}
	}
	file := isExport && (hostKind == tenancy.DownloadHost || wantsFile(req))
	var key tenancy.AppKey
	var project tenancy.Project
	var tok tenancy.Token // a Bearer token's
	kind := identity.KindApp
	_, hasBearer := bearer(req)
	if file && !hasBearer && req.Header.Get("X-App-Id") == "" && req.URL.Query().Has("token") {
		// A download link alone: good for its one export's file.
		p, err := r.tokenProject(req, exportID, cluster)
		if err != nil {
			return err
		}
		project, kind, key.AppID = p, identity.KindDownload, exportID
	} else if token, ok := bearer(req); ok {
		k, p, t, err := r.cfg.Resolver.Bearer(req.Context(), token)
		if errors.Is(err, tenancy.ErrBadCredentials) {
			return invalidToken()
		}
		if err != nil {
			return resolverError(err)
		}
		if p.Cluster != cluster.Name {
			return r.wrongCluster(req.Context(), p)
		}
		if err := checkScope(t, req.URL.Path); err != nil {
			return err
		}
		key, project, tok = k, p, t
	} else {
		// The client-side API takes client keys, in its own headers.
		appID, token, hint := req.Header.Get("X-App-Id"), req.Header.Get("X-App-Token"), "Send valid X-App-Id and X-App-Token headers."
		if clientAPI {
			appID, token = req.Header.Get("X-Client-Application-Id"), req.Header.Get("X-Client-Token")
			hint = "Send a client-side key's X-Client-Application-Id and X-Client-Token headers."
		}
		var err error
		key, project, err = r.cfg.Resolver.App(req.Context(), appID, token)
		// Each API takes its own keys: a client key is public (it ships in
		// browsers and apps) and never reaches the application API.
		if err == nil && clientAPI != (key.Kind == tenancy.KeyClient) {
			err = tenancy.ErrBadCredentials
		}
		if err != nil {
			return credentialError(err, hint)
		}
		if project.Cluster != cluster.Name {
			return r.wrongCluster(req.Context(), project)
		}
	}
	if clientAPI {
		if err := clientOrigin(c, project, tok, origin); err != nil {
			return err
		}
		kind = identity.KindClient // whatever the credential: the client API's narrower rights
	}
	// The project's pinned version, or the one the request names.
	version := project.APIVersion
	if version == "" {
		version = apiversion.Latest
	}
	if v := req.Header.Get(apiversion.Header); v != "" {
		if !apiversion.Known(v) {
			return apiversion.Invalid("The "+apiversion.Header+" header", v)
		}
		version = v
	}
	c.Response().Header().Set(apiversion.Header, version)
	trace.SpanFromContext(req.Context()).SetAttributes(attribute.String("tally.api_version", version))
	if err := r.limit(c, project, clientAPI, clientIP); err != nil {
		return err
	}
	upstream, err := r.upstreams.get(cluster)
	if err != nil {
		return err
	}
	if file {
		toFile(req, exportID)
		w, err := streamFile(c.Response().Writer)
		if err != nil {
			r.cfg.Log.Warn("a file download keeps the listener's write timeout", "err", err)
		}
		c.Response().Writer = w
	}
	signed := r.signer.Sign(identity.Identity{Audience: identity.AudienceRegional, ProjectID: project.ID, Cluster: cluster.Name,
		Method: req.Method, Path: upstreamPath(upstream, req), Query: req.URL.RawQuery, Kind: kind, KeyID: key.AppID, Scopes: tok.Scopes,
		APIVersion: version, RequestID: requestID, Expires: expires, Customer: tok.Customer})
	return r.fwd.forward(c, upstream, "cluster "+cluster.Name, signed, clientIP)
}

// limit applies the project's limits to a request: its plan's on the
// application API, the per-address one on the client-side API. Their
// headers go on the answer whatever it is; over a limit, it is 429.
func (r *Router) limit(c echo.Context, project tenancy.Project, clientAPI bool, clientIP string) error {
	ctx := c.Request().Context()
	var vs []verdict
	if clientAPI {
		vs = []verdict{r.limits.client(project.ID, clientIP, project.Settings.ClientLimit())}
	} else {
		plan, err := r.cfg.Resolver.Plan(ctx, project.Plan)
		if err != nil && !errors.Is(err, tenancy.ErrPlanNotFound) {
			return resolverError(err)
		}
		vs = r.limits.project(ctx, project.ID, plan.RequestsPerMinute, plan.RequestsPerHour)
	}
	setHeaders(c.Response().Header(), vs, r.limits.now())
	for _, v := range vs {
		if v.refused {
			return tooMany()
		}
	}
	return nil
}

func (r *Router) wrongCluster(ctx context.Context, p tenancy.Project) error {
	home, err := r.cfg.Resolver.ClusterByName(ctx, p.Cluster)
	if err != nil {
		return resolverError(err)
	}
	base := ""
	if _, byPort := ctx.Value(fixedHostKey{}).(string); byPort {
		base = r.cfg.PublicURLs[home.Name]
	}
	if base == "" {
		base = r.cfg.PublicScheme + "://" + home.APIHost
		if r.cfg.PublicPort != "" {
			base += ":" + r.cfg.PublicPort
		}
	}
	return &apierr.Error{Status: http.StatusMisdirectedRequest, Key: "wrong_cluster", Message: "Wrong cluster",
		Details: fmt.Sprintf("Project %s lives in cluster %s; send its requests to %s", p.ID, home.Name, base)}
}

func (r *Router) inDomain(host string) bool {
	d := r.cfg.BaseDomain
	return len(host) > len(d) && strings.HasSuffix(host, d) && host[len(host)-len(d)-1] == '.'
}

// clientIP returns the caller's address, the X-Forwarded-For chain to pass
// on, and the forwarded protocol. Forwarding headers are believed only from
// a trusted proxy, walking the chain from the right as far as trust goes.
func (r *Router) clientIP(req *http.Request) (ip, chain, proto string) {
	remote, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		remote = req.RemoteAddr
	}
	if !r.trusted(remote) {
		return remote, "", ""
	}
	xff := req.Header.Values("X-Forwarded-For")
	var hops []string
	for _, v := range xff {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	ip = remote
	i := len(hops) - 1
	for ; i >= 0; i-- {
		ip = hops[i]
		if !r.trusted(ip) {
			break
		}
	}
	if i < 0 {
		i = 0
	}
	return ip, strings.Join(hops[:max(i, 0)], ", "), req.Header.Get("X-Forwarded-Proto")
}

func (r *Router) trusted(ip string) bool {
	if len(r.cfg.TrustedProxies) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return r.trustedAddr(a)
}

func (r *Router) trustedAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func hostOnly(hostport string) string {
	h := hostport
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

func unknownHost(host string) error {
	return &apierr.Error{Status: http.StatusNotFound, Key: "not_found", Message: "Resource not found",
		Details: fmt.Sprintf("No cluster serves the host %q.", host), ResourceID: host, ResourceType: "cluster"}
}

func credentialError(err error, hint string) error {
	if errors.Is(err, tenancy.ErrBadCredentials) {
		return apierr.Unauthorized(hint)
	}
	return resolverError(err)
}

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
