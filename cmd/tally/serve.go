package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/tallyhq/tally/internal/cpushare"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/internal/peerlimit/ring"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/internal/telemetry/tracing"
	"github.com/tallyhq/tally/management"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/router"
	"github.com/tallyhq/tally/tenancy"
)

// serve runs the service on addr and its admin endpoints on adminAddr until
// ctx ends, then flushes traces.
// serve runs a service's listener (a public one, with its deadlines and
// cap, when public is set), its admin endpoints and its extra work.
func serve(ctx context.Context, role, addr, adminAddr string, h http.Handler, public *httpx.PublicOptions, m *telemetry.Metrics,
	ready func(context.Context) error, extra ...func(context.Context) error) error {
	log := logger()
	shutdown, err := tracing.Setup(ctx, "tally-"+role)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info(role+" listening", "addr", l.Addr().String())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if public != nil {
			return httpx.ServePublic(gctx, l, h, *public)
		}
		return httpx.Serve(gctx, l, h)
	})
	if adminAddr != "" {
		g.Go(func() error { return telemetry.ServeAdmin(gctx, adminAddr, m, ready, log) })
	}
	for _, f := range extra {
		g.Go(func() error { return f(gctx) })
	}
	return g.Wait()
}

func runRouter(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("router", flag.ExitOnError)
	addr := fs.String("addr", ":8080", "listen address of the public interface")
	adminAddr := fs.String("admin-addr", ":9090", "listen address of /metrics, /healthz, /readyz")
	tenancyURL := fs.String("tenancy-url", "", "tenancy database URL")
	sec := fs.String("identity-secret", "", "hex secret signing the identity header")
	prevSec := fs.String("identity-secret-previous", "", "during a rotation, the old identity secret: download links made with it are still good (it signs nothing)")
	domain := fs.String("base-domain", "localhost", "domain of the cluster hosts (api.<domain>, us1.api.<domain> …)")
	scheme := fs.String("public-scheme", "https", "scheme of public base URLs")
	port := fs.String("public-port", "", "port of public base URLs, if not the scheme's default")
	mgmtURL := fs.String("management-url", "", "URL of the management service")
	proxies := fs.String("trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is trusted")
	watch := fs.Duration("watch-interval", 500*time.Millisecond, "how often directory changes are polled")
	perIP := fs.Int("max-conns-per-ip", 256, "open connections one client address may hold (trusted proxies are not capped)")
	tlsDir := fs.String("tls-dir", "", "serve HTTPS on --addr with the certificates of this directory: <dir>/<name>/tls.crt and tls.key, chosen by SNI, renewals picked up (default: plain HTTP)")
	redirectAddr := fs.String("redirect-addr", "", "with --tls-dir, a plain-HTTP listen address answering 308 to the https URL (default: none)")
	peerAddr := fs.String("peer-addr", "", "listen address of this replica's rate-limit peer service (gRPC), e.g. :7070; with one of --peers, --peers-dns, --peers-k8s the region's replicas keep the per-address limits as one ring (default: off, each replica its own)")
	peerAdvertise := fs.String("peer-advertise", "", "host:port the other replicas reach this one's peer service at (default: --peer-addr, its host, if unspecified, this machine's address; $POD_IP with --peers-k8s)")
	peers := fs.String("peers", "", "static ring: comma-separated host:port of every replica's peer service")
	peersDNS := fs.String("peers-dns", "", "ring from DNS: name:port, every address of the name (a headless Service's) is a replica; looked up every --peers-dns-interval")
	peersDNSEvery := fs.Duration("peers-dns-interval", 5*time.Second, "how often --peers-dns is looked up again")
	peersK8s := fs.String("peers-k8s", "", "ring from the Kubernetes API: a label selector of the router pods in this pod's namespace, each reached at its pod IP and container port named peer; only ready pods count (its service account needs list and watch on pods; the pod's IP in $POD_IP)")
	kubeconfig := fs.String("kubeconfig", "", "with --peers-k8s, a kubeconfig file to reach the Kubernetes API with, its context's namespace the pods' (default: the pod's in-cluster service account)")
	peerDeadline := fs.Duration("peer-deadline", 20*time.Millisecond, "how long a limit check waits on the replica owning its counter before deciding on this replica's share")
	if err := parse(fs, args); err != nil {
		return err
	}
	key, err := secret(*sec)
	if err != nil {
		return err
	}
	prevKey, err := previousSecret("identity-secret-previous", *prevSec, key)
	if err != nil {
		return err
	}
	trusted, err := prefixes(*proxies)
	if err != nil {
		return err
	}
	// The certificates before the database: a directory with none that
	// loads stops the start with its reason.
	var certs *router.CertDir
	if *tlsDir != "" {
		if certs, err = router.LoadCertDir(*tlsDir, router.CertDirOptions{Log: logger()}); err != nil {
			return err
		}
	}
	if *redirectAddr != "" && *tlsDir == "" {
		return errors.New("--redirect-addr redirects to the TLS listener: give --tls-dir too")
	}
	pool, err := db.Open(ctx, *tenancyURL, db.Options{Name: "tally-router"})
	if err != nil {
		return err
	}
	defer pool.Close()
	m := telemetry.NewMetrics("router", "")
	resolver := tenancy.NewResolver(pool, tenancy.ResolverOptions{Log: logger()})
	if err := resolver.CheckServer(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	m.Register(resolver.Collectors()...)
	var member *peerlimit.Limiter
	var theRing ring.Ring // nil: each replica its own limits (a nil *Limiter in it would not be nil)
	if *peerAddr != "" {
		pc := peerlimit.Config{Addr: *peerAddr, Advertise: *peerAdvertise, DNS: *peersDNS, DNSInterval: *peersDNSEvery,
			Deadline: *peerDeadline, Log: logger().With("component", "peerlimit")}
		if *peers != "" {
			pc.Peers = strings.Split(*peers, ",")
		}
		if *peersK8s != "" {
			pc.K8s = &peerlimit.K8s{Selector: *peersK8s, PodIP: os.Getenv("POD_IP"), Kubeconfig: *kubeconfig}
			// client-go logs through klog: into this process's JSON log.
			klog.SetSlogLogger(logger().With("component", "kubernetes"))
		}
		if member, err = peerlimit.Start(ctx, pc); err != nil {
			return err
		}
		defer member.Close()
		theRing = member
		logger().Info("per-address limits kept by the ring", "peer_addr", member.Addr(), "peers", member.Peers())
	} else if *peers != "" || *peersDNS != "" || *peersK8s != "" {
		return errors.New("--peers, --peers-dns and --peers-k8s need --peer-addr, this replica's peer listener")
	}
	rt, err := router.New(router.Config{BaseDomain: *domain, PublicScheme: *scheme, PublicPort: *port, ManagementURL: *mgmtURL,
		TrustedProxies: trusted, IdentitySecret: key, IdentitySecretPrevious: prevKey, Resolver: resolver, Log: logger(), Metrics: m,
		PeerLimits: theRing})
	if err != nil {
		return err
	}
	public := rt.PublicOptions()
	public.MaxConnsPerIP = *perIP
	extra := []func(context.Context) error{func(ctx context.Context) error { resolver.Watch(ctx, *watch); return nil }}
	if certs != nil {
		logger().Info("router serves TLS", "dir", *tlsDir, "certificates", certs.Names())
		public.TLS = certs.TLSConfig()
	}
	if *redirectAddr != "" {
		l, err := net.Listen("tcp", *redirectAddr)
		if err != nil {
			return err
		}
		logger().Info("router redirects plain HTTP to https", "addr", l.Addr().String())
		plain := public
		plain.TLS = nil
		extra = append(extra, func(ctx context.Context) error { return httpx.ServePublic(ctx, l, router.RedirectToHTTPS(), plain) })
	}
	ready := rt.Ready
	if member != nil {
		// Not ready before the ring is known: a replica serving alone
		// would give each address its whole limit again.
		ready = func(ctx context.Context) error {
			if err := member.Ready(); err != nil {
				return err
			}
			return rt.Ready(ctx)
		}
	}
	return serve(ctx, "router", *addr, *adminAddr, rt.Handler(), &public, m, ready, extra...)
}

func runRegional(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("regional", flag.ExitOnError)
	addr := fs.String("addr", ":8081", "listen address")
	adminAddr := fs.String("admin-addr", ":9091", "listen address of /metrics, /healthz, /readyz")
	cluster := fs.String("cluster", "", "name of the cluster served (api, us1, as1, or a dedicated one)")
	dbURL := fs.String("database-url", "", "the cluster's database URL")
	tenancyURL := fs.String("tenancy-url", "", "tenancy database URL (webhook configurations, project secrets)")
	privateHooks := fs.Bool("webhooks-allow-private", false, "let webhooks reach loopback and private addresses (development only)")
	sec := behindRouterSecretFlags(fs, "hex secret of management's calls of /internal (not the identity secret)", true)
	maxConns := fs.Int("max-conns", 0, "database pool size (default: 8 per CPU, at least 16)")
	cpuTarget := fs.Float64("cpu-target", 0.6, "CPU utilisation (0-1, of the pod's CPU limit, else the machine) above which a project over its plan's share of this instance is paced; 1 paces no one")
	retention := fs.Duration("bin-retention", bin.DefaultRetention, "how long deleted products and SKUs stay in the bin")
	partRows := fs.Int("export-part-rows", 1_000_000, "the most rows in one export file; larger exports are split into parts")
	exportRetention := fs.Duration("export-retention", 30*24*time.Hour, "how long export files are kept")
	downloadURL := fs.String("download-base-url", "", "base URL of the cluster's download host in export links (default: https:// and its download host in the directory)")
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := sec.decode()
	if err != nil {
		return err
	}
	m := telemetry.NewMetrics("regional", *cluster)
	app, err := regional.New(ctx, regional.Config{Cluster: *cluster, DatabaseURL: *dbURL, TenancyURL: *tenancyURL, IdentitySecret: k.identity,
		OperatorSecret: k.operator, IdentitySecretPrevious: k.identityPrevious, OperatorSecretPrevious: k.operatorPrevious, MaxConns: int32(*maxConns), Log: logger(), Metrics: m, Webhooks: webhooks.Options{AllowPrivateTargets: *privateHooks},
		BinRetention: *retention, ExportPartRows: *partRows, ExportRetention: *exportRetention, DownloadBaseURL: *downloadURL,
		CPUShare: cpushare.Options{Target: *cpuTarget}})
	if err != nil {
		return err
	}
	defer app.Close()
	return serve(ctx, "regional", *addr, *adminAddr, app.Handler(), nil, m, app.Ready,
		func(ctx context.Context) error { app.RunBackground(ctx); return nil })
}

func runManagement(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("management", flag.ExitOnError)
	addr := fs.String("addr", ":8082", "listen address")
	adminAddr := fs.String("admin-addr", ":9092", "listen address of /metrics, /healthz, /readyz")
	tenancyURL := fs.String("tenancy-url", "", "tenancy database URL")
	// It signs with the operator secret, so it never needs the old one.
	sec := behindRouterSecretFlags(fs, "hex secret signing its calls of regional's /internal (not the identity secret)", false)
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := sec.decode()
	if err != nil {
		return err
	}
	m := telemetry.NewMetrics("management", "")
	app, err := management.New(ctx, management.Config{TenancyURL: *tenancyURL, IdentitySecret: k.identity, IdentitySecretPrevious: k.identityPrevious, OperatorSecret: k.operator, Log: logger(), Metrics: m})
	if err != nil {
		return err
	}
	defer app.Close()
	return serve(ctx, "management", *addr, *adminAddr, app.Handler(), nil, m, app.Ready)
}
