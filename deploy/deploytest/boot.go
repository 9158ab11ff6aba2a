package deploytest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Config of a boot.
type Config struct {
	// Binary is the tally binary, built once by the test.
	Binary string
	// Overlays are booted in this order (the control plane first: its
	// init containers migrate the tenancy database the others read).
	Overlays []*Rendered
	// Scope names the Kubernetes cluster of an overlay, by its Dir: the
	// overlays of one scope resolve each other's service names. By default
	// each overlay is a cluster of its own.
	Scope map[string]string
	// Secret gives the value of a key of a Secret that the manifests
	// reference but do not render: the ones the operator (or terraform)
	// creates, such as the identity and operator secrets and the database
	// URLs. ok false leaves an optional reference unset and fails a
	// required one.
	Secret func(ref SecretRef) (value string, ok bool)
	// Database returns the local database URL standing for a database URL
	// written in the rendered objects (a literal value or a rendered Secret).
	Database func(ref DatabaseRef) (string, error)
	// ExtraEnv is environment the test adds to a container, each addition a
	// documented replacement (say, letting webhooks reach the test's loopback
	// receiver).
	ExtraEnv func(w *Workload, container string) map[string]string
	// External are services the manifests name that no overlay renders and
	// that the platform works without (name.namespace → why), e.g. an
	// OpenTelemetry collector: they map to a local port nothing listens on.
	External map[string]string
	// Filter, when set, boots only the workloads it accepts.
	Filter func(w *Workload) bool
	// Mutate, when set, changes a workload's pod before it boots: the
	// sub-tests that put a defect back use it.
	Mutate func(w *Workload)
	// CA signs the certificates standing for cert-manager's and
	// CockroachDB's.
	CA *CA
	// Dir is where pods' files and logs go.
	Dir string
	// Entrypoint is the image's entrypoint (the Dockerfile's ENTRYPOINT),
	// which a container's command may name: it runs Binary.
	Entrypoint string
	// ReadyTimeout bounds the wait for each readiness probe (default 30 s).
	ReadyTimeout time.Duration
	// Replicas, when set, is how many pods of a Deployment boot (default
	// one): more for a test of what replicas do together. Services and
	// load balancers reach the first.
	Replicas func(w *Workload) int
	// KubeconfigEnv, when set, has the platform serve each Kubernetes
	// cluster an API of its own (see KubeAPI) and give every Tally
	// container whose pod mounts a service account token a kubeconfig for
	// that token in this environment variable. It stands for the
	// in-cluster configuration (the token and CA under
	// /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST),
	// which a process here cannot be given.
	KubeconfigEnv string
	Logf          func(format string, args ...any)
}

// SecretRef names one key of a Secret a container reads.
type SecretRef struct {
	Overlay, Namespace, Name, Key string
	// Env is the variable it fills ("" for a mounted file).
	Env      string
	Workload string
}

// DatabaseRef is a database URL the rendered objects hold.
type DatabaseRef struct {
	Overlay, Namespace, Workload, Env string
	URL                               *url.URL
}

// Workload is one pod of a Deployment or a Job of an overlay.
type Workload struct {
	Overlay   *Rendered
	Kind      string // Deployment or Job
	Name      string
	Namespace string
	Pod       corev1.PodTemplateSpec
	PodName   string
	Replica   int // of its Deployment, from 0

	scope string
	ports map[int32]int // container port → local port
	dir   string
	// volume name → local directory
	volumes map[string]string
	skipped bool
	// kubeconfig is the pod's service account's, when it mounts its token
	// and the platform serves a Kubernetes API.
	kubeconfig string
}

func (w *Workload) String() string { return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.id()) }

// id names the workload's pod among its replicas: the first by its
// Deployment's name, as before there were replicas.
func (w *Workload) id() string {
	if w.Replica == 0 {
		return w.Name
	}
	return fmt.Sprintf("%s[%d]", w.Name, w.Replica)
}

// LocalPort is where this machine serves the pod's containerPort.
func (w *Workload) LocalPort(containerPort int32) (int, bool) {
	port, ok := w.ports[containerPort]
	return port, ok
}

// container is one planned process.
type container struct {
	w        *Workload
	c        corev1.Container
	init     bool
	args     []string
	env      map[string]string
	raw      map[string]string // env before the rewrite
	envOrder []string
	name     string
	root     string // the container's file system: its mounts at their paths
	proc     *proc
}

// Platform is a booted set of overlays.
type Platform struct {
	cfg       Config
	workloads []*Workload
	planned   map[*Workload][]*container
	mu        sync.Mutex // guards procs
	procs     []*proc
	closeOnce sync.Once
	apis      map[string]*kubeAPI // by scope, with KubeconfigEnv
}

// Boot plans every container of the overlays (environment, arguments,
// files, ports), then runs them as Kubernetes would: each Job's and each
// pod's init containers to completion, then the pods' containers, and
// waits for every readiness probe. A process that exits, a Job that fails
// or a probe that never answers 2xx fails the boot; the error names the
// object and field concerned and holds the tail of the process's log.
//
// What is replaced, and why (Kubernetes is not here):
//   - service host names (name.ns.svc, name.ns.svc.cluster.local, with or
//     without a port) become 127.0.0.1 and the local port of the container
//     port the Service's targetPort names, in its scope's cluster;
//   - listen addresses (":8081", "0.0.0.0:8081") become 127.0.0.1 and a free
//     port, one per pod and container port, which probes and services use;
//   - database URLs (postgres:// or postgresql://, literal or from a Secret)
//     are given by Config.Database or Config.Secret: the local PostgreSQL
//     servers, which have no TLS, so sslmode=verify-full and the sslrootcert,
//     sslcert and sslkey paths are dropped once the boot has checked that a
//     volume of the container mounts each of those files;
//   - mounted volumes are directories under Config.Dir (Secrets and
//     ConfigMaps from the rendered objects; a Secret a cert-manager
//     Certificate writes gets a certificate for its dnsNames signed by the
//     test's CA; any other Secret the manifests do not render gets test
//     certificates for its items), and paths under a mount path in
//     arguments and environment are rewritten to them;
//   - fieldRef metadata.name/namespace, status.podIP (127.0.0.1) and
//     spec.nodeName; resourceFieldRef from the container's resources;
//   - the pod's own address and one of its ports ("$(POD_IP):7070", as a
//     pod advertises itself to its peers) become 127.0.0.1 and that
//     port's local port;
//   - with Config.KubeconfigEnv, the in-cluster configuration of a pod
//     that mounts its service account's token: a kubeconfig for that
//     token on its cluster's Kubernetes API, which the boot serves (see
//     kubeAPI), listing the booted pods with their ports moved as above.
func Boot(ctx context.Context, cfg Config) (*Platform, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	p := &Platform{cfg: cfg, planned: map[*Workload][]*container{}}
	if err := p.plan(); err != nil {
		return nil, err
	}
	if err := p.run(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Platform) scopeOf(r *Rendered) string {
	if s, ok := p.cfg.Scope[r.Dir]; ok {
		return s
	}
	return r.Dir
}

// plan makes every workload's ports, files and containers.
func (p *Platform) plan() error {
	for _, r := range p.cfg.Overlays {
		add := func(kind, name, ns string, pod corev1.PodTemplateSpec) {
			first := &Workload{Overlay: r, Kind: kind, Name: name, Namespace: ns, Pod: *pod.DeepCopy(), scope: p.scopeOf(r)}
			if p.cfg.Filter != nil && !p.cfg.Filter(first) {
				return
			}
			n := 1
			if kind == "Deployment" && p.cfg.Replicas != nil {
				n = max(p.cfg.Replicas(first), 1)
			}
			for i := range n {
				w := &Workload{Overlay: r, Kind: kind, Name: name, Namespace: ns, Pod: *pod.DeepCopy(), scope: first.scope,
					ports: map[int32]int{}, volumes: map[string]string{}, Replica: i}
				w.PodName = fmt.Sprintf("%s-7d9c5b-%s", name, podSuffixes[i%len(podSuffixes)])
				if p.cfg.Mutate != nil {
					p.cfg.Mutate(w)
				}
				p.workloads = append(p.workloads, w)
			}
		}
		for _, j := range r.Jobs {
			add("Job", j.Name, j.Namespace, j.Spec.Template)
		}
		for _, d := range r.Deployments {
			add("Deployment", d.Name, d.Namespace, d.Spec.Template)
		}
	}
	// Ports first: the services of every workload must be known before any
	// environment is rewritten.
	for _, w := range p.workloads {
		for _, c := range append(append([]corev1.Container{}, w.Pod.Spec.InitContainers...), w.Pod.Spec.Containers...) {
			for _, cp := range c.Ports {
				if _, ok := w.ports[cp.ContainerPort]; !ok {
					port, err := freePort()
					if err != nil {
						return err
					}
					w.ports[cp.ContainerPort] = port
				}
			}
		}
	}
	for _, w := range p.workloads {
		w.dir = filepath.Join(p.cfg.Dir, "pods", safe(w.scope), w.Namespace, w.id())
		if err := os.MkdirAll(w.dir, 0o755); err != nil {
			return err
		}
		if err := p.volumes(w); err != nil {
			return err
		}
		if err := p.serviceAccount(w); err != nil {
			return err
		}
		all := append([]corev1.Container{}, w.Pod.Spec.InitContainers...)
		for i, c := range all {
			cc, err := p.container(w, c, true, i)
			if err != nil {
				return err
			}
			if cc != nil {
				p.planned[w] = append(p.planned[w], cc)
			}
		}
		for i, c := range w.Pod.Spec.Containers {
			cc, err := p.container(w, c, false, i)
			if err != nil {
				return err
			}
			if cc != nil {
				p.planned[w] = append(p.planned[w], cc)
			}
		}
	}
	return nil
}

// IsTallyImage reports whether image is the platform's image (any
// registry, tag or digest): its last path element is "tally".
func IsTallyImage(image string) bool {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	last := path.Base(image)
	if i := strings.Index(last, ":"); i >= 0 {
		last = last[:i]
	}
	return last == "tally"
}
