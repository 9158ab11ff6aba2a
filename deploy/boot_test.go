package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tallyhq/tally/deploy/deploytest"
	"github.com/tallyhq/tally/internal/dbtest"
)

// TestBoot boots the platform from the rendered manifests: the control
// plane's overlay (the one with management), one regional overlay and the
// dedicated example, each its own Kubernetes cluster, every Deployment and
// Job of them run as the tally binary with exactly its container's command,
// arguments and environment (see deploytest.Boot for what is mapped onto
// this machine, and why). Then it does what an operator and a customer do:
// a management key (tally admin create-management-key, the README's first
// step), the clusters registered in the directory when no manifest does it,
// and per cluster a project made through management, a webhook, a customer
// created through the cluster's router with the project's keys (over TLS
// with the host's name when the router serves TLS), the webhook delivered
// to a local receiver, and management calls through every router. Sub-tests
// put back two of issue 33's defects and watch the boot fail.
func TestBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots the platform: not in -short")
	}
	start := time.Now()
	plan := render(t)
	bin := buildTally(t)
	t.Logf("tally built in %v", time.Since(start).Round(time.Millisecond))
	env := newEnv(t, bin, plan)
	t.Logf("database servers started at %v", time.Since(start).Round(time.Millisecond))

	t.Run("platform", func(t *testing.T) {
		// Two router pods per cluster: they must find each other in the
		// Kubernetes API and keep the per-address limits as one ring.
		p := env.boot(t, deploytest.Config{Overlays: plan.boot, Replicas: func(w *deploytest.Workload) int {
			if role(w.Pod.Spec.Containers) == "router" {
				return 2
			}
			return 1
		}})
		t.Logf("booted %d containers in %v", len(p.Containers()), time.Since(start).Round(time.Millisecond))
		checkFlags(t, bin, p)
		env.endToEnd(t, p, plan)
		if err := p.Err(); err != nil {
			t.Fatalf("a container exited while serving:\n%v", err)
		}
		p.Close()
		t.Logf("platform checked in %v", time.Since(start).Round(time.Millisecond))
	})

	// Issue 33's defects, put back one at a time on the control plane's
	// regional Deployment (booted alone, after its overlay's Jobs): each
	// must fail the boot, where the same boot without it passes.
	t.Run("defects", func(t *testing.T) {
		region, overlays := plan.control, []*deploytest.Rendered{plan.control}
		if plan.home != nil {
			region, overlays = plan.home, []*deploytest.Rendered{plan.home, plan.control}
		}
		alone := func(w *deploytest.Workload) bool {
			return w.Overlay == region && (w.Kind == "Job" || role(w.Pod.Spec.Containers) == "regional")
		}
		// The control plane goes first (deploy/README.md, "Upgrades"):
		// regional waits for the tenancy schema management migrates.
		env.migrateTenancy(t)
		p, err := env.tryBoot(t, deploytest.Config{Overlays: overlays, Filter: alone})
		if err != nil {
			t.Fatalf("regional alone does not boot, with nothing dropped:\n%v", err)
		}
		p.Close()
		for _, tc := range []struct {
			name, drop string
		}{
			// "regional and management have no TALLY_OPERATOR_SECRET: both exit 1 at start"
			{"no operator secret", "TALLY_OPERATOR_SECRET"},
			// "regional has no tenancy database URL … while its readiness probe still says ready"
			{"no tenancy URL", "TALLY_TENANCY_URL"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dropped := false
				p, err := env.tryBoot(t, deploytest.Config{Overlays: overlays, Filter: alone,
					ReadyTimeout: 6 * time.Second,
					Mutate: func(w *deploytest.Workload) {
						if w.Kind == "Job" {
							return
						}
						for i := range w.Pod.Spec.Containers {
							c := &w.Pod.Spec.Containers[i]
							for j := len(c.Env) - 1; j >= 0; j-- {
								if c.Env[j].Name == tc.drop {
									c.Env = append(c.Env[:j], c.Env[j+1:]...)
									dropped = true
								}
							}
						}
					}})
				if !dropped {
					t.Fatalf("the manifests set no %s on regional: nothing to drop", tc.drop)
				}
				if err == nil {
					p.Close()
					t.Fatalf("regional without %s booted and its readinessProbe says ready: the boot test cannot see this defect", tc.drop)
				}
				t.Logf("without %s the boot fails, as it must: %s", tc.drop, firstLine(err.Error()))
			})
		}

		// "the router's management URL names a namespace that nothing
		// creates; for us1 and as1 management runs in another Kubernetes
		// cluster and is unreachable": a remote region's router, booted
		// alone with the control plane's objects present, first as rendered,
		// then without the Service its TALLY_MANAGEMENT_URL names.
		t.Run("management unreachable from a remote region", func(t *testing.T) {
			if plan.regional == nil {
				t.Skip("no region without the control plane")
			}
			host := managementHost(plan.regional)
			router := func(w *deploytest.Workload) bool {
				return w.Overlay.Dir == plan.regional.Dir && role(w.Pod.Spec.Containers) == "router"
			}
			boot := func(r *deploytest.Rendered) error {
				overlays := []*deploytest.Rendered{r, plan.control}
				if plan.home != nil {
					overlays = append(overlays, plan.home)
				}
				p, err := env.tryBoot(t, deploytest.Config{Overlays: overlays, Filter: router})
				if err == nil {
					p.Close()
				}
				return err
			}
			if err := boot(plan.regional); err != nil {
				t.Fatalf("%s's router alone does not boot as rendered:\n%v", plan.regional.Dir, err)
			}
			cut := *plan.regional
			cut.Services = nil
			for _, s := range plan.regional.Services {
				if s.Name != strings.Split(host, ".")[0] {
					cut.Services = append(cut.Services, s)
				}
			}
			if len(cut.Services) == len(plan.regional.Services) {
				t.Fatalf("%s renders no Service %s for its routers' TALLY_MANAGEMENT_URL: nothing to take away", plan.regional.Dir, host)
			}
			err := boot(&cut)
			if err == nil {
				t.Fatalf("%s's router booted without the Service %s its TALLY_MANAGEMENT_URL names", plan.regional.Dir, host)
			}
			t.Logf("without Service %s the boot fails, as it must: %s", host, firstLine(err.Error()))
		})
	})
}

// plan is what the test boots.
type plan struct {
	all       map[string]*deploytest.Rendered // every leaf overlay, by directory
	control   *deploytest.Rendered            // renders management
	home      *deploytest.Rendered            // the region whose Kubernetes cluster runs the control plane
	regional  *deploytest.Rendered            // a regional overlay without management, if there is one
	others    []*deploytest.Rendered          // the other regional overlays
	dedicated []*deploytest.Rendered
	boot      []*deploytest.Rendered // control plane first
}

// render renders every leaf overlay (each must render) and picks those to boot.
func render(t *testing.T) plan {
	t.Helper()
	dirs, err := deploytest.Overlays(".")
	if err != nil {
		t.Fatal(err)
	}
	pl := plan{all: map[string]*deploytest.Rendered{}}
	for _, d := range dirs {
		r, err := deploytest.Render(d)
		if err != nil {
			t.Errorf("overlay %s does not render: %v", d, err)
			continue
		}
		pl.all[d] = r
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, d := range dirs {
		r := pl.all[d]
		roles := roles(r)
		switch {
		case strings.HasPrefix(d, "dedicated"+string(filepath.Separator)):
			pl.dedicated = append(pl.dedicated, r)
		case roles["management"] && pl.control == nil:
			pl.control = r
		}
	}
	if pl.control == nil {
		t.Fatalf("no overlay of %v renders a management Deployment (the control plane)", dirs)
	}
	// The control plane runs in the Kubernetes cluster of the region whose
	// routers reach management by a Service only the control plane renders
	// (the others have an ExternalName of their own); the test boots that
	// region and every other.
	for _, d := range dirs {
		r := pl.all[d]
		if r == pl.control || !roles(r)["regional"] || strings.HasPrefix(d, "dedicated") {
			continue
		}
		host := managementHost(r)
		if host != "" && !renders(r, host) && renders(pl.control, host) && pl.home == nil {
			pl.home = r
		} else if pl.regional == nil {
			pl.regional = r
		} else {
			pl.others = append(pl.others, r)
		}
	}
	// As deploy/README.md applies them ("Upgrades"): the control plane first
	// (management migrates the tenancy database, whose schema version the
	// regions' pods wait for), its region's cluster beside it, then the
	// other regions, then a dedicated cluster.
	pl.boot = append(pl.boot, pl.control)
	if pl.home != nil && !roles(pl.control)["regional"] {
		pl.boot = append(pl.boot, pl.home)
	}
	if pl.regional != nil {
		pl.boot = append(pl.boot, pl.regional)
	}
	pl.boot = append(pl.boot, pl.others...) // every region boots
	pl.boot = append(pl.boot, pl.dedicated...)
	var names []string
	for _, r := range pl.boot {
		names = append(names, r.Dir)
	}
	t.Logf("overlays: %v; booting %v", dirs, names)
	return pl
}

// managementHost is the host of the routers' TALLY_MANAGEMENT_URL in r.
func managementHost(r *deploytest.Rendered) string {
	for _, d := range r.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "TALLY_MANAGEMENT_URL" {
					if u, err := url.Parse(e.Value); err == nil {
						return u.Hostname()
					}
				}
			}
		}
	}
	return ""
}

// renders reports whether r renders a Service named host (its first label).
func renders(r *deploytest.Rendered, host string) bool {
	for _, s := range r.Services {
		if s.Name == strings.Split(host, ".")[0] {
			return true
		}
	}
	return false
}

// config is a key of an overlay's ConfigMaps ("" when none has it).
func config(r *deploytest.Rendered, key string) string {
	for _, c := range r.ConfigMaps {
		if v, ok := c.Data[key]; ok {
			return v
		}
	}
	return ""
}

// role is the tally subcommand a pod's first tally container runs.
func role(cs []corev1.Container) string {
	for _, c := range cs {
		if !deploytest.IsTallyImage(c.Image) {
			continue
		}
		argv := append(append([]string{}, c.Command...), c.Args...)
		if len(c.Command) > 0 {
			argv = argv[1:]
		}
		if len(argv) > 0 {
			return argv[0]
		}
	}
	return ""
}

func roles(r *deploytest.Rendered) map[string]bool {
	out := map[string]bool{}
	for _, d := range r.Deployments {
		out[role(d.Spec.Template.Spec.Containers)] = true
	}
	return out
}

func buildTally(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tally")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/tally")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// env is what the test provides in place of the operator: secrets,
// databases, a CA.
type env struct {
	bin        string
	plan       plan
	ca         *deploytest.CA
	identity   string
	operator   string
	previous   map[string]string
	entrypoint string

	mu        sync.Mutex
	servers   map[string]*dbtest.Server // tenancy, and one per regional database
	databases map[string]string         // key → local URL
	regionals int
}

func newEnv(t *testing.T, bin string, pl plan) *env {
	ca, err := deploytest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{bin: bin, plan: pl, ca: ca, servers: map[string]*dbtest.Server{}, databases: map[string]string{},
		identity: strings.Repeat("1a", 32), operator: strings.Repeat("2b", 32),
		previous: map[string]string{"TALLY_IDENTITY_SECRET_PREVIOUS": strings.Repeat("3c", 32), "TALLY_OPERATOR_SECRET_PREVIOUS": strings.Repeat("4d", 32)}}
	e.entrypoint = dockerEntrypoint(t)
	// One PostgreSQL server for the tenancy database and one per booted
	// overlay's regional database, started at once.
	var wg sync.WaitGroup
	names := []string{"tenancy"}
	for i := range pl.boot {
		names = append(names, fmt.Sprintf("regional-%d", i))
	}
	servers := make([]*dbtest.Server, len(names))
	for i := range names {
		wg.Add(1)
		go func() { defer wg.Done(); servers[i] = dbtest.Private(t) }()
	}
	wg.Wait()
	for i, n := range names {
		if servers[i] == nil {
			t.FailNow()
		}
		e.servers[n] = servers[i]
	}
	return e
}

// dockerEntrypoint is the image's ENTRYPOINT path, which a container's
// command may name ("" without a Dockerfile).
func dockerEntrypoint(t *testing.T) string {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT\s+\[\s*"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// database is the local database standing for key: "tenancy" (the one
// directory of the platform), else one regional database per key.
func (e *env) database(t *testing.T, key string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if u, ok := e.databases[key]; ok {
		return u, nil
	}
	var srv *dbtest.Server
	if key == "tenancy" {
		srv = e.servers["tenancy"]
	} else {
		srv = e.servers[fmt.Sprintf("regional-%d", e.regionals%(len(e.servers)-1))]
		e.regionals++
	}
	u := srv.NewDatabase(t)
	e.databases[key] = u
	t.Logf("database %s: %s", key, u)
	return u, nil
}

// migrateTenancy migrates the tenancy database as management's init
// container does, for boots that leave the control plane out.
func (e *env) migrateTenancy(t *testing.T) {
	t.Helper()
	u, _ := e.database(t, "tenancy")
	cmd := exec.Command(e.bin, "migrate")
	cmd.Env = append(os.Environ(), "TALLY_TENANCY_URL="+u)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally migrate (tenancy): %v\n%s", err, out)
	}
}

// config fills what every boot of the test shares.
func (e *env) config(t *testing.T, cfg deploytest.Config) deploytest.Config {
	cfg.Binary = e.bin
	cfg.CA = e.ca
	cfg.Dir = t.TempDir()
	cfg.Entrypoint = e.entrypoint
	cfg.Logf = t.Logf
	// A pod that mounts its service account's token (the router, for its
	// peer discovery) reaches its cluster's Kubernetes API, which the boot
	// serves, through a kubeconfig in place of the in-cluster config.
	cfg.KubeconfigEnv = "TALLY_KUBECONFIG"
	if e.plan.home != nil {
		// Applied to the Kubernetes cluster and namespace of its region.
		cfg.Scope = map[string]string{e.plan.control.Dir: e.plan.home.Dir}
	}
	cfg.External = map[string]string{
		"otel-collector.observability": "the OpenTelemetry collector: traces are exported to it when it is there, and lost otherwise",
	}
	// The secrets the operator creates, as deploy/README.md lists them
	// (terraform makes them): the test's values, the database URLs as the
	// README writes them (CockroachDB, verify-full, the mounted client
	// certificates), which the boot then checks and maps onto local
	// PostgreSQL (see Database below).
	cfg.Secret = func(ref deploytest.SecretRef) (string, bool) {
		r := e.plan.all[ref.Overlay]
		switch ref.Name + "/" + ref.Key {
		case "tally-identity/secret":
			return e.identity, true
		case "tally-operator/secret":
			return e.operator, true
		case "tally-identity/previous", "tally-operator/previous":
			return "", false // only during a rotation
		case "tally-regional-db/url":
			return "postgresql://tally@cockroachdb-public:26257/" + config(r, "REGIONAL_DATABASE") +
				"?sslmode=verify-full&sslrootcert=/etc/tally/db/regional/ca.crt&sslcert=/etc/tally/db/regional/tls.crt&sslkey=/etc/tally/db/regional/tls.key", true
		case "tally-tenancy-db/url":
			host := "cockroachdb-public"
			if strings.HasPrefix(ref.Overlay, "dedicated") && e.plan.home != nil {
				host = config(e.plan.home, "COCKROACH_DOMAIN") // the shared cluster's nodes
			}
			db := config(e.plan.control, "TENANCY_DATABASE")
			if db == "" {
				db = "tally_tenancy"
			}
			return "postgresql://tally@" + host + ":26257/" + db +
				"?sslmode=verify-full&sslrootcert=/etc/tally/db/tenancy/ca.crt&sslcert=/etc/tally/db/tenancy/tls.crt&sslkey=/etc/tally/db/tenancy/tls.key", true
		}
		return "", false
	}
	// Database URLs the manifests write themselves: the tenancy database
	// (the multi-region one) by its name, the others by cluster, host and
	// database. The test's own (127.0.0.1) pass as they are.
	cfg.Database = func(ref deploytest.DatabaseRef) (string, error) {
		if ref.URL.Hostname() == "127.0.0.1" {
			return ref.URL.String(), nil
		}
		db := strings.TrimPrefix(ref.URL.Path, "/")
		if strings.Contains(db, "tenancy") {
			return e.database(t, "tenancy")
		}
		return e.database(t, db)
	}
	// The test's webhook receiver is on loopback, which regional refuses
	// to call in production (and must: the rendered manifests do not allow
	// it); a receiver on the internet is not to be had here.
	cfg.ExtraEnv = func(w *deploytest.Workload, c string) map[string]string {
		if role(w.Pod.Spec.Containers) == "regional" && c == w.Pod.Spec.Containers[0].Name {
			return map[string]string{"TALLY_WEBHOOKS_ALLOW_PRIVATE": "true"}
		}
		return nil
	}
	return cfg
}

func (e *env) tryBoot(t *testing.T, cfg deploytest.Config) (*deploytest.Platform, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return deploytest.Boot(ctx, e.config(t, cfg))
}

func (e *env) boot(t *testing.T, cfg deploytest.Config) *deploytest.Platform {
	t.Helper()
	p, err := e.tryBoot(t, cfg)
	if err != nil {
		t.Fatalf("the platform does not boot from the rendered manifests:\n%v", err)
	}
	t.Cleanup(p.Close)
	return p
}

var envRe = regexp.MustCompile(`\(env (TALLY_[A-Z0-9_]+)\)`)

// checkFlags fails on a TALLY_ variable that names no flag of its
// container's subcommand: the binary ignores it silently, so a misspelt
// or removed setting would not crash, it would just not be set.
func checkFlags(t *testing.T, bin string, p *deploytest.Platform) {
	t.Helper()
	known := map[string]map[string]bool{}
	for _, c := range p.Containers() {
		if len(c.Args) == 0 {
			continue
		}
		sub := c.Args[0]
		if known[sub] == nil {
			out, _ := exec.Command(bin, sub, "-h").CombinedOutput()
			known[sub] = map[string]bool{"TALLY_LOG_LEVEL": true}
			for _, m := range envRe.FindAllStringSubmatch(string(out), -1) {
				known[sub][m[1]] = true
			}
		}
		for k := range c.RawEnv {
			if strings.HasPrefix(k, "TALLY_") && !known[sub][k] {
				t.Errorf("%s container %s: %s is no flag of tally %s (tally %s -h lists them)", c.Workload, c.Name, k, sub, sub)
			}
		}
	}
}

// cluster is one booted cluster: its regional container and its router.
type cluster struct {
	name, region, kind, apiHost, downloadHost string
	overlay                                   *deploytest.Rendered
	regional                                  deploytest.Container
	router                                    *deploytest.Container
}

// client reaches every public host at its overlay's router's
// LoadBalancer, over TLS trusting the test's CA when the router serves TLS.
type client struct {
	*http.Client
	scheme string
	hosts  map[string]string // public host → local address
	mgmt   http.Header
}

func (e *env) endToEnd(t *testing.T, p *deploytest.Platform, pl plan) {
	t.Helper()
	clusters, cl := e.clusters(t, p, pl)
	mgmtHost := ""
	for _, c := range clusters {
		if c.overlay == pl.control || c.overlay == pl.home {
			mgmtHost = c.apiHost
		}
	}
	if mgmtHost == "" {
		t.Fatal("the control plane's overlay boots no regional cluster: no host to reach management at")
	}

	// The operator's first step: a management key, from the tenancy
	// database management uses.
	var mgmtEnv map[string]string
	for _, c := range p.Containers() {
		if c.Workload.Overlay == pl.control && role(c.Workload.Pod.Spec.Containers) == "management" {
			mgmtEnv = map[string]string{"TALLY_TENANCY_URL": c.Env["TALLY_TENANCY_URL"]}
		}
	}
	out, err := p.Run(mgmtEnv, "admin", "create-management-key", "--name", "boot-test")
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ ID, Token string }
	if err := json.Unmarshal(out, &key); err != nil {
		t.Fatalf("create-management-key: %v: %s", err, out)
	}
	cl.mgmt = http.Header{"X-Management-Id": {key.ID}, "X-Management-Token": {key.Token}}

	// The directory: every booted cluster registered, as the README says
	// (tally admin register-cluster), with the in-cluster URL of its
	// regional Service mapped onto this machine.
	for _, c := range clusters {
		upstream := ""
		if h := config(c.overlay, "REGIONAL_INTERNAL_HOST"); h != "" {
			upstream = fmt.Sprintf("http://%s:%d", h, listenPort(t, c.regional))
		} else {
			in, _, err := p.ServiceFor(c.regional.Workload, listenPort(t, c.regional))
			if err != nil {
				t.Fatal(err)
			}
			upstream = "http://" + in
		}
		local, err := p.Rewrite(pl.control, c.regional.Workload.Namespace, upstream)
		if err != nil {
			t.Fatalf("cluster %s's upstream %s from the control plane: %v", c.name, upstream, err)
		}
		t.Logf("registering cluster %s (%s, %s, %s): upstream %s (here %s)", c.name, c.kind, c.region, c.apiHost, upstream, local)
		if _, err := p.Run(mgmtEnv, "admin", "register-cluster", "--name", c.name, "--region", c.region, "--kind", c.kind,
			"--api-host", c.apiHost, "--download-host", c.downloadHost, "--upstream-url", local); err != nil {
			t.Fatal(err)
		}
	}

	// The plain-HTTP port of every router's LoadBalancer answers with the
	// https URL, when the router serves TLS.
	if cl.scheme == "https" {
		for _, c := range clusters {
			for _, lb := range p.LoadBalancers(c.overlay) {
				if lb.Port.Port != 80 {
					continue
				}
				req, _ := http.NewRequest("GET", "http://"+lb.Local+"/v1/customers", nil)
				req.Host = c.apiHost
				res, err := (&http.Transport{}).RoundTrip(req)
				if err != nil {
					t.Fatalf("%s port 80: %v", c.apiHost, err)
				}
				res.Body.Close()
				if loc := res.Header.Get("Location"); res.StatusCode/100 != 3 || loc != "https://"+c.apiHost+"/v1/customers" {
					t.Errorf("http://%s/v1/customers: %d, Location %q; want a redirect to https", c.apiHost, res.StatusCode, loc)
				} else {
					t.Logf("http://%s/v1/customers (port 80): %d to %s", c.apiHost, res.StatusCode, loc)
				}
			}
		}
	}

	for _, c := range clusters {
		t.Run("cluster "+c.name, func(t *testing.T) {
			// A project through management (at the control plane's host).
			r := cl.do(t, "POST", mgmtHost, "/management/v1/projects", cl.mgmt, map[string]any{"name": "boot " + c.name, "cluster_id": c.name})
			if r.status != 200 {
				t.Fatalf("create project in %s: %d %s", c.name, r.status, r.body)
			}
			var proj struct {
				ID  string
				Key struct {
					AppID    string `json:"app_id"`
					AppToken string `json:"app_token"`
				} `json:"server_side_key"`
			}
			r.decode(t, &proj)
			app := http.Header{"X-App-Id": {proj.Key.AppID}, "X-App-Token": {proj.Key.AppToken}}
			// Its client-side key and allowed origin, before a router
			// caches the project.
			ck := clientKey(t, cl, mgmtHost, proj.ID)

			// A webhook to a local receiver.
			got := make(chan map[string]any, 4)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var ev map[string]any
				_ = json.NewDecoder(r.Body).Decode(&ev)
				got <- ev
			}))
			defer rcv.Close()
			r = cl.do(t, "POST", mgmtHost, "/management/v1/projects/"+proj.ID+"/webhooks", cl.mgmt,
				map[string]any{"target_url": rcv.URL + "/hooks", "events": []string{"customer.created"}})
			if r.status != 200 {
				t.Fatalf("create webhook: %d %s", r.status, r.body)
			}
			var hook struct{ ID string }
			r.decode(t, &hook)

			// A customer through the cluster's own router, with the project's keys.
			r = cl.do(t, "POST", c.apiHost, "/v1/customers", app, map[string]any{"source_id": "boot-" + c.name, "name": "Boot"})
			if r.status != 200 {
				t.Fatalf("create customer at %s: %d %s", c.apiHost, r.status, r.body)
			}
			r = cl.do(t, "GET", c.apiHost, "/v1/customers/boot-"+c.name, app, nil)
			if r.status != 200 {
				t.Fatalf("get customer at %s: %d %s", c.apiHost, r.status, r.body)
			}

			// The cluster's routers are one ring: the client-side API's
			// limit for one address (5 per 5 s) holds across both.
			e.ringHolds(t, p, c, cl, ck)

			// The webhook delivered.
			select {
			case ev := <-got:
				if ev["type"] != "customer.created" || ev["project_id"] != proj.ID {
					t.Fatalf("webhook: %v", ev)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("no webhook delivered within 15 s (regional's log: %s)", p.Logs())
			}

			// Management calls: the deliveries (management asks the
			// cluster's regional over /internal, with the operator secret),
			// and the project through this cluster's own router, which must
			// reach management from its Kubernetes cluster.
			ok := false
			for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				r = cl.do(t, "GET", mgmtHost, "/management/v1/projects/"+proj.ID+"/webhooks/"+hook.ID+"/deliveries", cl.mgmt, nil)
				ok = r.status == 200 && bytes.Contains(r.body, []byte("customer.created"))
			}
			if !ok {
				t.Errorf("deliveries through management: %d %s", r.status, r.body)
			}
			r = cl.do(t, "GET", c.apiHost, "/management/v1/projects/"+proj.ID, cl.mgmt, nil)
			if r.status != 200 {
				t.Errorf("management through %s's router (%s): %d %s", c.name, c.apiHost, r.status, r.body)
			}
		})
	}
}

// ringHolds checks that the cluster's router pods found each other in its
// Kubernetes API (each one's tally_ratelimit_peers is 2), asking it only
// what their Role grants, and keep one client-side limit for an address:
// 10 requests sent to one pod after the other, from one address (the
// test's, 127.0.0.1), get the burst of 5 (and a token refilled at most),
// where two routers each keeping its own bucket gave 10.
func (e *env) ringHolds(t *testing.T, p *deploytest.Platform, c cluster, cl *client, ck clientSideKey) {
	t.Helper()
	var routers []deploytest.Container
	for _, rc := range p.Containers() {
		if rc.Workload.Overlay == c.overlay && rc.Args[0] == "router" {
			routers = append(routers, rc)
		}
	}
	if len(routers) != 2 {
		t.Fatalf("%d router pods booted in %s, want 2", len(routers), c.overlay.Dir)
	}
	port := func(rc deploytest.Container, name string) string {
		for _, cp := range rc.Workload.Pod.Spec.Containers[0].Ports {
			if cp.Name == name {
				if local, ok := rc.Workload.LocalPort(cp.ContainerPort); ok {
					return "127.0.0.1:" + strconv.Itoa(local)
				}
			}
		}
		t.Fatalf("%s: no port %s", rc.Workload, name)
		return ""
	}
	peers := regexp.MustCompile(`(?m)^tally_ratelimit_peers (\d+)$`)
	for _, rc := range routers {
		got := ""
		for deadline := time.Now().Add(10 * time.Second); got != "2"; time.Sleep(50 * time.Millisecond) {
			res, err := http.Get("http://" + port(rc, "admin") + "/metrics")
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if m := peers.FindSubmatch(b); m != nil {
					got = string(m[1])
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: tally_ratelimit_peers %q after 10 s, want 2 (log: %s)", rc.Workload, got, p.Logs())
			}
		}
	}
	asked := p.KubeAPI(c.overlay).Requests()
	for _, r := range asked {
		if r.Refused != "" {
			t.Fatalf("the Kubernetes API refused %s: %s", r.Attributes, r.Refused)
		}
	}
	t.Logf("%s: both router pods see a ring of 2 (%d requests to the Kubernetes API, none refused)", c.name, len(asked))

	clients := make([]*http.Client, len(routers))
	for i, rc := range routers {
		addr := port(rc, "https")
		if cl.scheme == "http" {
			addr = port(rc, "http")
		}
		d := &net.Dialer{Timeout: 2 * time.Second}
		clients[i] = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.ca.Pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			}}}
	}
	accepted := 0
	start := time.Now()
	for i := range 10 {
		req, _ := http.NewRequest("GET", cl.scheme+"://"+c.apiHost+"/client/v1/promotions/tiers", nil)
		req.Header.Set("Origin", "https://shop.example")
		req.Header.Set("X-Client-Application-Id", ck.AppID)
		req.Header.Set("X-Client-Token", ck.AppToken)
		res, err := clients[i%2].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case 200:
			accepted++
		case 429:
		default:
			t.Fatalf("client-side request to router pod %d: %d %s", i%2, res.StatusCode, b)
		}
	}
	if refill := int(time.Since(start).Seconds()); accepted < 5 || accepted > 5+refill+1 {
		t.Fatalf("%d of 10 client-side requests from one address over two router pods accepted, want 5 (the limit of 5 per 5 s once, not once per pod)", accepted)
	}
	t.Logf("%s: %d of 10 client-side requests from one address over the two router pods accepted (limit 5 per 5 s)", c.name, accepted)
}

// clientSideKey is a project's client-side key pair.
type clientSideKey struct {
	AppID    string `json:"app_id"`
	AppToken string `json:"app_token"`
}

// clientKey makes the project a client-side key and allows the origin
// https://shop.example.
func clientKey(t *testing.T, cl *client, mgmtHost, projectID string) clientSideKey {
	t.Helper()
	key := cl.do(t, "POST", mgmtHost, "/management/v1/projects/"+projectID+"/api-keys", cl.mgmt, map[string]any{"kind": "client"})
	if key.status != 200 {
		t.Fatalf("client key: %d %s", key.status, key.body)
	}
	var ck clientSideKey
	key.decode(t, &ck)
	if r := cl.do(t, "PUT", mgmtHost, "/management/v1/projects/"+projectID, cl.mgmt,
		map[string]any{"client_trusted_domains": []string{"https://shop.example"}}); r.status != 200 {
		t.Fatalf("trusted domains: %d %s", r.status, r.body)
	}
	return ck
}

// clusters finds the booted regional clusters and makes the client.
func (e *env) clusters(t *testing.T, p *deploytest.Platform, pl plan) ([]cluster, *client) {
	t.Helper()
	cl := &client{scheme: "http", hosts: map[string]string{}}
	var out []cluster
	routers := map[*deploytest.Rendered]*deploytest.Container{}
	cs := p.Containers()
	for i, c := range cs {
		if role(c.Workload.Pod.Spec.Containers) == "router" && c.Args[0] == "router" {
			routers[c.Workload.Overlay] = &cs[i]
		}
	}
	tlsOn := false
	for _, c := range cs {
		if c.Args[0] != "regional" {
			continue
		}
		rt := routers[c.Workload.Overlay]
		if rt == nil {
			t.Fatalf("overlay %s runs regional but no router", c.Workload.Overlay.Dir)
		}
		domain := rt.Env["TALLY_BASE_DOMAIN"]
		name := c.Env["TALLY_CLUSTER"]
		k := cluster{name: name, overlay: c.Workload.Overlay, regional: c, router: rt, kind: "shared",
			region: map[string]string{"api": "europe", "us1": "us", "as1": "asia"}[name]}
		if r := c.Env["TALLY_REGION"]; r != "" {
			k.region = r
		}
		if k.region == "" {
			k.region = "europe"
		}
		if strings.HasPrefix(c.Workload.Overlay.Dir, "dedicated") {
			k.kind = "dedicated"
		}
		if h := config(c.Workload.Overlay, "API_HOST"); h != "" {
			k.apiHost, k.downloadHost = h, config(c.Workload.Overlay, "DOWNLOAD_HOST")
		} else if name == "api" {
			k.apiHost, k.downloadHost = "api."+domain, "download."+domain
		} else {
			k.apiHost, k.downloadHost = name+".api."+domain, name+".download."+domain
		}
		// The host's DNS names the overlay's LoadBalancer: the TLS port
		// when the router serves TLS, else its plain one.
		tlsDir := rt.Env["TALLY_TLS_DIR"] != ""
		tlsOn = tlsOn || tlsDir
		var lbs []string
		for _, lb := range p.LoadBalancers(c.Workload.Overlay) {
			lbs = append(lbs, fmt.Sprintf("%s:%d", lb.Service.Name, lb.Port.Port))
			if (tlsDir && lb.Port.Port == 443) || (!tlsDir && lb.Port.Port == 80) {
				cl.hosts[k.apiHost], cl.hosts[k.downloadHost] = lb.Local, lb.Local
			}
		}
		if cl.hosts[k.apiHost] == "" {
			t.Fatalf("overlay %s: no LoadBalancer Service port %s reaches its router (ports: %v)", c.Workload.Overlay.Dir,
				map[bool]string{true: "443", false: "80"}[tlsDir], lbs)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if tlsOn {
		cl.scheme = "https"
	}
	d := &net.Dialer{Timeout: 2 * time.Second}
	cl.Client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: e.ca.Pool}, // the server name is the URL's host: SNI as a client sends it
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			local, ok := cl.hosts[host]
			if !ok {
				return nil, fmt.Errorf("no booted router serves %s", host)
			}
			return d.DialContext(ctx, network, local)
		}}}
	return out, cl
}

// listenPort is the container port regional's TALLY_ADDR names.
func listenPort(t *testing.T, c deploytest.Container) int32 {
	v := c.RawEnv["TALLY_ADDR"]
	if v == "" {
		for _, cp := range c.Workload.Pod.Spec.Containers[0].Ports {
			if cp.Name == "http" {
				return cp.ContainerPort
			}
		}
		t.Fatalf("%s: no TALLY_ADDR and no port named http", c.Workload)
	}
	_, port, _ := net.SplitHostPort(v)
	n, _ := strconv.Atoi(port)
	return int32(n)
}

type resp struct {
	status int
	body   []byte
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
}

func (cl *client) do(t *testing.T, method, host, path string, h http.Header, body any) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, (&url.URL{Scheme: cl.scheme, Host: host, Path: path}).String(), rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
