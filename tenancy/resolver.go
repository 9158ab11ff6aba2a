package tenancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"golang.org/x/sync/singleflight"
)

// ResolverOptions size and time the caches; zero values take defaults.
type ResolverOptions struct {
	Size        int           // entries per cache (default 100,000)
	TTL         time.Duration // positive entries (default 5 minutes); a safety net behind Watch
	NegativeTTL time.Duration // unknown credentials and hosts (default 2 seconds)
	// ReadyOffline is how long after its last Watch poll the resolver is
	// still ready while the directory cannot be reached (default TTL):
	// see Ready.
	ReadyOffline time.Duration
	Log          *slog.Logger
}

// Resolver answers the directory questions of every request from LRU caches
// in front of the tenancy database.
type Resolver struct {
	pool     *db.Pool
	log      *slog.Logger
	schema   *dbschema.Gate
	server   *db.ServerGate
	offline  time.Duration // ResolverOptions.ReadyOffline
	hosts    *expirable.LRU[string, hostEntry]
	keys     *expirable.LRU[string, AppKey]
	projects *expirable.LRU[string, Project]
	mgmt     *expirable.LRU[string, ManagementKey]
	webhooks *expirable.LRU[string, []Webhook]        // by project id
	schemas  *expirable.LRU[string, []EventSchema]    // by project id
	metas    *expirable.LRU[string, []MetadataSchema] // by project id
	stacking *expirable.LRU[string, StackingRules]    // by project id
	origins  *expirable.LRU[string, Origins]          // by cluster: its projects' trusted domains
	plans    *expirable.LRU[string, Plan]
	tokens   *expirable.LRU[string, Token]    // by hash, for at most a minute
	negative *expirable.LRU[string, struct{}] // "k:"+app id, "m:"+management id, "h:"+host
	group    singleflight.Group

	hits, misses atomic.Int64
	lastSync     atomic.Int64 // unix nanos of the last successful Watch poll
}

type hostEntry struct {
	cluster Cluster
	kind    HostKind
}

// NewResolver makes a resolver over the tenancy database.
func NewResolver(pool *db.Pool, o ResolverOptions) *Resolver {
	if o.Size == 0 {
		o.Size = 100_000
	}
	if o.TTL == 0 {
		o.TTL = 5 * time.Minute
	}
	if o.NegativeTTL == 0 {
		o.NegativeTTL = 2 * time.Second
	}
	if o.ReadyOffline == 0 {
		o.ReadyOffline = o.TTL
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Resolver{
		pool:     pool,
		log:      o.Log,
		schema:   NewSchemaGate(pool),
		server:   db.NewServerGate(pool, "the directory (tenancy database)"),
		offline:  o.ReadyOffline,
		hosts:    expirable.NewLRU[string, hostEntry](o.Size, nil, o.TTL),
		keys:     expirable.NewLRU[string, AppKey](o.Size, nil, o.TTL),
		projects: expirable.NewLRU[string, Project](o.Size, nil, o.TTL),
		mgmt:     expirable.NewLRU[string, ManagementKey](1000, nil, o.TTL),
		webhooks: expirable.NewLRU[string, []Webhook](o.Size, nil, o.TTL),
		schemas:  expirable.NewLRU[string, []EventSchema](o.Size, nil, o.TTL),
		metas:    expirable.NewLRU[string, []MetadataSchema](o.Size, nil, o.TTL),
		stacking: expirable.NewLRU[string, StackingRules](o.Size, nil, o.TTL),
		origins:  expirable.NewLRU[string, Origins](1000, nil, o.TTL),
		plans:    expirable.NewLRU[string, Plan](1000, nil, o.TTL),
		tokens:   expirable.NewLRU[string, Token](o.Size, nil, min(o.TTL, time.Minute)),
		negative: expirable.NewLRU[string, struct{}](o.Size, nil, o.NegativeTTL),
	}
}

// loadTimeout bounds a directory read that fills a cache.
const loadTimeout = 5 * time.Second

// cached answers key from cache, or from load (one database read shared by
// concurrent misses), remembering a notFound answer in the negative cache
// under prefix+key for NegativeTTL. A budgeted lookup (of a name the
// client sent: a host, key id or token) that misses both caches draws on
// the context's LookupBudget.
func cached[V any](ctx context.Context, r *Resolver, cache *expirable.LRU[string, V], prefix, key string, notFound error, budgeted bool,
	load func(ctx context.Context) (V, error)) (V, error) {
	if v, ok := cache.Get(key); ok {
		r.hits.Add(1)
		return v, nil
	}
	var zero V
	if _, neg := r.negative.Get(prefix + key); neg {
		r.hits.Add(1)
		return zero, notFound
	}
	// found is the outcome reported to the budget, whatever way this
	// returns (a load that panicked must not hold its take for good).
	found := true
	if budgeted {
		if b, _ := ctx.Value(budgetKey{}).(LookupBudget); b != nil {
			done, ok := b.Take(prefix + key)
			if !ok {
				return zero, ErrLookupsSpent
			}
			defer func() { done(found) }()
		}
	}
	r.misses.Add(1)
	v, err, _ := r.group.Do(prefix+key, func() (any, error) {
		// Every caller waiting on this load shares its outcome: it runs
		// on none's cancellation (a client that hung up would fail the
		// others' lookups as the directory being down), within its own
		// time limit.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		v, err := load(lctx)
		if notFound != nil && errors.Is(err, notFound) {
			r.negative.Add(prefix+key, struct{}{})
		}
		if err != nil {
			return nil, err
		}
		cache.Add(key, v)
		return v, nil
	})
	// Only a name that does not exist is charged; a database error is not
	// the client's.
	found = notFound == nil || !errors.Is(err, notFound)
	if err != nil {
		return zero, err
	}
	return v.(V), nil
}

// ErrLookupsSpent is a lookup refused without reading the directory: the
// caller's LookupBudget is spent.
var ErrLookupsSpent = errors.New("tenancy: too many lookups of names that do not exist from this client")

// A LookupBudget bounds one client's directory reads of names that do not
// exist. A name that is not cached costs a database query, and one that
// does not exist is remembered for NegativeTTL only, so a client sending a
// new key id, token or host each time would cost one query per request
// without it. Only the names a client sends are budgeted (not the project
// or plan of a key it proved it holds), and only when no cache has them:
// while the budget is spent, such a name is refused even if it exists.
type LookupBudget interface {
	// Take asks for a lookup of name, before it reads the database; false
	// when the budget is spent. done(found) reports the outcome: a lookup
	// that found nothing keeps its charge, one that found its name gives
	// it back. Concurrent lookups of one name share one read (and so one
	// charge): a caller joining a lookup under way is not refused.
	Take(name string) (done func(found bool), ok bool)
}

type budgetKey struct{}

// WithLookupBudget returns ctx whose lookups draw on b.
func WithLookupBudget(ctx context.Context, b LookupBudget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// Host resolves a request's host name (no port) to its cluster.
func (r *Resolver) Host(ctx context.Context, host string) (Cluster, HostKind, error) {
	e, err := cached(ctx, r, r.hosts, "h:", host, ErrUnknownHost, true, func(ctx context.Context) (hostEntry, error) {
		c, kind, err := ClusterByHost(ctx, r.pool, host)
		return hostEntry{c, kind}, err
	})
	return e.cluster, e.kind, err
}

// App resolves an application key pair to its key and live project.
// Unknown, revoked and wrong credentials are all ErrBadCredentials.
func (r *Resolver) App(ctx context.Context, appID, token string) (AppKey, Project, error) {
	if !credentialID(appID) || token == "" {
		return AppKey{}, Project{}, ErrBadCredentials
	}
	k, err := cached(ctx, r, r.keys, "k:", appID, ErrKeyNotFound, true, func(ctx context.Context) (AppKey, error) { return GetAppKey(ctx, r.pool, appID) })
	if errors.Is(err, ErrKeyNotFound) || (err == nil && (k.RevokedAt != nil || !tokenMatches(k.tokenHash, token))) {
		return AppKey{}, Project{}, ErrBadCredentials
	}
	if err != nil {
		return AppKey{}, Project{}, err
	}
	p, err := r.Project(ctx, k.ProjectID)
	if errors.Is(err, ErrProjectNotFound) {
		return AppKey{}, Project{}, ErrBadCredentials
	}
	return k, p, err
}

// credentialID says whether id can name a key: up to 128 bytes of text.
// Bytes that are no UTF-8, or a NUL, are none: the database refuses them
// as a parameter, which was answered as the directory being down (503),
// once per request since an error is not cached.
func credentialID(id string) bool {
	return id != "" && len(id) <= 128 && utf8.ValidString(id) && strings.IndexByte(id, 0) < 0
}

// Project returns a live project.
func (r *Resolver) Project(ctx context.Context, id string) (Project, error) {
	return cached(ctx, r, r.projects, "p:", id, ErrProjectNotFound, false, func(ctx context.Context) (Project, error) { return GetProject(ctx, r.pool, id) })
}

// Webhooks returns a project's live webhook configurations.
func (r *Resolver) Webhooks(ctx context.Context, projectID string) ([]Webhook, error) {
	return cached(ctx, r, r.webhooks, "w:", projectID, nil, false, func(ctx context.Context) ([]Webhook, error) { return ListWebhooks(ctx, r.pool, projectID) })
}

// EventSchemas returns a project's custom event schemas, oldest first. The
// list is cached and shared: read it, never change it. A created, updated
// or deleted schema is seen here with the next Watch poll.
func (r *Resolver) EventSchemas(ctx context.Context, projectID string) ([]EventSchema, error) {
	return cached(ctx, r, r.schemas, "es:", projectID, nil, false, func(ctx context.Context) ([]EventSchema, error) {
		return EventSchemas.List(ctx, r.pool, projectID)
	})
}

// MetadataSchemas returns a project's metadata schemas, oldest first,
// cached and shared as EventSchemas are: a change is seen with the next
// Watch poll.
func (r *Resolver) MetadataSchemas(ctx context.Context, projectID string) ([]MetadataSchema, error) {
	return cached(ctx, r, r.metas, "ms:", projectID, nil, false, func(ctx context.Context) ([]MetadataSchema, error) {
		return MetadataSchemas.List(ctx, r.pool, projectID)
	})
}

// StackingRules returns a project's stacking rules, its own or the
// defaults; a change is seen here with the next Watch poll.
func (r *Resolver) StackingRules(ctx context.Context, projectID string) (StackingRules, error) {
	return cached(ctx, r, r.stacking, "sr:", projectID, nil, false, func(ctx context.Context) (StackingRules, error) {
		s, found, err := GetStackingRules(ctx, r.pool, projectID)
		if !found {
			return DefaultStackingRules(), err
		}
		return s.Rules, err
	})
}

// ClusterOrigins are the origins that some live project of the cluster
// trusts (TrustedDomains); a project's change is seen with the next poll.
func (r *Resolver) ClusterOrigins(ctx context.Context, cluster string) (Origins, error) {
	return cached(ctx, r, r.origins, "o:", cluster, nil, false, func(ctx context.Context) (Origins, error) {
		lists, err := TrustedDomains(ctx, r.pool, cluster)
		return CompileOrigins(lists...), err
	})
}

// Plan returns a plan.
func (r *Resolver) Plan(ctx context.Context, name string) (Plan, error) {
	return cached(ctx, r, r.plans, "pl:", name, ErrPlanNotFound, false, func(ctx context.Context) (Plan, error) { return GetPlan(ctx, r.pool, name) })
}

// Management checks a management key pair.
func (r *Resolver) Management(ctx context.Context, id, token string) (ManagementKey, error) {
	if !credentialID(id) || token == "" {
		return ManagementKey{}, ErrBadCredentials
	}
	k, err := cached(ctx, r, r.mgmt, "m:", id, ErrKeyNotFound, true, func(ctx context.Context) (ManagementKey, error) { return GetManagementKey(ctx, r.pool, id) })
	if errors.Is(err, ErrKeyNotFound) || (err == nil && (k.RevokedAt != nil || !tokenMatches(k.tokenHash, token))) {
		return ManagementKey{}, ErrBadCredentials
	}
	return k, err
}

// Invalidate drops what a change makes stale.
func (r *Resolver) Invalidate(c Change) {
	switch c.Kind {
	case ChangeAppKey:
		r.keys.Remove(c.Key)
		r.negative.Remove("k:" + c.Key)
	case ChangeProject:
		r.projects.Remove(c.Key)
		r.negative.Remove("p:" + c.Key)
		r.origins.Purge() // rare: rebuilt at the next preflight
	case ChangeManagementKey:
		r.mgmt.Remove(c.Key)
		r.negative.Remove("m:" + c.Key)
	case ChangeWebhooks:
		r.webhooks.Remove(c.Key)
	case ChangeEventSchemas:
		r.schemas.Remove(c.Key)
	case ChangeMetadataSchemas:
		r.metas.Remove(c.Key)
	case ChangeStackingRules:
		r.stacking.Remove(c.Key)
	case ChangePlan:
		r.plans.Remove(c.Key)
	case ChangeToken:
		r.tokens.Remove(c.Key)
	case ChangeCluster:
		// Rare, and a cluster has several hosts: drop them all.
		r.hosts.Purge()
		r.negative.Purge()
	}
}

// WatchLookback is how far behind its last poll Watch reads again, so that a
// change whose transaction committed late (up to this long after the change
// was written, RecordChange) is still seen. Evicting twice is harmless.
const WatchLookback = 5 * time.Second

// Watch polls directory_changes every interval until ctx ends and evicts
// what changed. With interval 500ms, a revoked key stops working on every
// instance within about a second: no shared memory or message bus is needed,
// only the database that every instance already reads.
func (r *Resolver) Watch(ctx context.Context, interval time.Duration) {
	var since time.Time
	for first := true; ; first = false {
		changes, now, err := ChangesSince(ctx, r.pool, since)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "tenancy: polling directory changes failed", "err", err.Error())
			}
		default:
			if !first {
				for _, c := range changes {
					r.Invalidate(c)
				}
			}
			since = now.Add(-WatchLookback)
			r.lastSync.Store(time.Now().UnixNano())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// CheckServer is for a router's start: the directory's server refused
// (a CockroachDB below the minimum, or without READ COMMITTED) stops it
// with what to change; one not reachable within wait is left to Ready.
func (r *Resolver) CheckServer(ctx context.Context, wait time.Duration) error {
	return r.server.Start(ctx, wait)
}

// Ready is the router's readiness. While the directory can be read, the
// instance is ready once its server is one Tally runs on (db.CheckServer:
// an old CockroachDB, or one with READ COMMITTED off, is never ready, the
// error saying what to change) and its schema is as new as this binary
// needs (CheckSchema). While it cannot, the instance keeps serving what its
// caches hold (and the rate limits fail open), so it stays ready if it
// found the schema good and its Watch read the directory within
// ReadyOffline (default TTL): an outage of the directory does not take
// every router out of the load balancer at once. Past that bound every
// entry loaded before the outage has expired and the instance could only
// answer 503, so it steps aside for those that can reach the directory (a
// partition of its own zone, say); one that never read the directory
// since it started (cold caches) is not ready either.
func (r *Resolver) Ready(ctx context.Context) error {
	err := r.pool.Ping(ctx)
	if err == nil {
		// A CockroachDB Tally does not run on (db.CheckServer) is never
		// served: the probe says what to change.
		if err = r.server.Check(ctx); errors.Is(err, db.ErrServerRefused) {
			return err
		}
	}
	if err == nil {
		if err = r.schema.Check(ctx); err == nil || errors.Is(err, dbschema.ErrBehind) {
			return err
		}
	}
	err = db.Classify(err)
	last := r.lastSync.Load()
	if last == 0 {
		return fmt.Errorf("the directory (tenancy database) cannot be reached and was not read since this instance started: %w", err)
	}
	if !r.schema.Good() {
		return fmt.Errorf("the directory (tenancy database) cannot be reached and its schema was never checked: %w", err)
	}
	if age := time.Since(time.Unix(0, last)); age > r.offline {
		return fmt.Errorf("the directory (tenancy database) cannot be reached and was last read %s ago, longer than its caches keep an entry (%s): %w",
			age.Round(time.Second), r.offline, err)
	}
	return nil
}

// LastSync is when Watch last read the directory's changes (zero: never).
func (r *Resolver) LastSync() time.Time {
	if t := r.lastSync.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// CheckSchema is nil once the directory's schema is at least at the version
// of this binary's last tenancy migration; until then, an error saying so
// (dbschema.ErrBehind) or that the directory cannot be read. A schema found
// behind is read again after a few seconds; one found good never is.
func (r *Resolver) CheckSchema(ctx context.Context) error { return r.schema.Check(ctx) }

// Misses is how many lookups missed the caches
// (tally_tenancy_cache_misses_total); concurrent misses of one name share
// one database read, and each is counted.
func (r *Resolver) Misses() int64 { return r.misses.Load() }

// Collectors exposes cache figures for Prometheus.
func (r *Resolver) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tally_tenancy_cache_hits_total",
			Help: "Directory lookups answered from cache."}, func() float64 { return float64(r.hits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tally_tenancy_cache_misses_total",
			Help: "Directory lookups that read the tenancy database."}, func() float64 { return float64(r.misses.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tally_tenancy_sync_age_seconds",
			Help: "Seconds since the directory change log was last read."}, func() float64 {
			t := r.lastSync.Load()
			if t == 0 {
				return -1
			}
			return time.Since(time.Unix(0, t)).Seconds()
		}),
	}
}

// ClusterByName returns a cluster by its name (for naming the right base URL
// when a request reaches the wrong one). Its hosts are cached like any host.
func (r *Resolver) ClusterByName(ctx context.Context, name string) (Cluster, error) {
	v, err, _ := r.group.Do("c:"+name, func() (any, error) { return GetCluster(ctx, r.pool, name) })
	if err != nil {
		return Cluster{}, err
	}
	return v.(Cluster), nil
}

// LeaseQuota takes quota of a project's window for this router replica
// (see LeaseQuota): never cached, it is the one write the limits make.
func (r *Resolver) LeaseQuota(ctx context.Context, projectID string, window time.Duration, start time.Time,
	want, limit int64) (granted, used int64, err error) {
	return LeaseQuota(ctx, r.pool, projectID, window, start, want, limit)
}

// DropRateWindows deletes the rate windows that started before cutoff.
func (r *Resolver) DropRateWindows(ctx context.Context, cutoff time.Time) error {
	_, err := DropRateWindows(ctx, r.pool, cutoff, 0)
	return err
}

// PruneChanges deletes the change records older than keep.
func (r *Resolver) PruneChanges(ctx context.Context, keep time.Duration) error {
	_, err := PruneChanges(ctx, r.pool, keep, 0)
	return err
}

// Bearer resolves an OAuth access token to the key that issued it, its
// project and the token: ErrBadCredentials when the token is unknown,
// expired or revoked, or its key revoked (a revocation reaches every
// router with the next directory poll).
func (r *Resolver) Bearer(ctx context.Context, token string) (AppKey, Project, Token, error) {
	if token == "" || len(token) > 256 {
		return AppKey{}, Project{}, Token{}, ErrBadCredentials
	}
	hash := TokenHash(token)
	t, err := cached(ctx, r, r.tokens, "t:", hash, ErrTokenNotFound, true, func(ctx context.Context) (Token, error) { return GetToken(ctx, r.pool, hash) })
	if errors.Is(err, ErrTokenNotFound) || (err == nil && !t.Live(time.Now())) {
		return AppKey{}, Project{}, Token{}, ErrBadCredentials
	}
	if err != nil {
		return AppKey{}, Project{}, Token{}, err
	}
	k, err := cached(ctx, r, r.keys, "k:", t.AppID, ErrKeyNotFound, false, func(ctx context.Context) (AppKey, error) { return GetAppKey(ctx, r.pool, t.AppID) })
	if errors.Is(err, ErrKeyNotFound) || (err == nil && k.RevokedAt != nil) {
		return AppKey{}, Project{}, Token{}, ErrBadCredentials
	}
	if err != nil {
		return AppKey{}, Project{}, Token{}, err
	}
	p, err := r.Project(ctx, t.ProjectID)
	if errors.Is(err, ErrProjectNotFound) {
		return AppKey{}, Project{}, Token{}, ErrBadCredentials
	}
	return k, p, t, err
}

// IssueToken issues an access token to key for scopes, bound by b.
func (r *Resolver) IssueToken(ctx context.Context, key AppKey, scopes []string, b Binding) (string, Token, error) {
	var token string
	var t Token
	err := db.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		token, t, err = CreateToken(ctx, tx, key, scopes, b, time.Now())
		return err
	})
	return token, t, err
}

// Token reads a project's token for introspection (not cached: an admin's
// question, answered from the source).
func (r *Resolver) Token(ctx context.Context, token string) (Token, error) {
	return GetToken(ctx, r.pool, TokenHash(token))
}

// RevokeToken revokes one of a project's live tokens.
func (r *Resolver) RevokeToken(ctx context.Context, projectID, token string) error {
	return db.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		return RevokeToken(ctx, tx, projectID, TokenHash(token), time.Now())
	})
}

// DropExpiredTokens deletes the access tokens that expired before cutoff.
func (r *Resolver) DropExpiredTokens(ctx context.Context, cutoff time.Time) error {
	_, err := DropExpiredTokens(ctx, r.pool, cutoff, 0)
	return err
}
