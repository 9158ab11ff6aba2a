package deploytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
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

func (p *Platform) container(w *Workload, c corev1.Container, init bool, i int) (*container, error) {
	where := fmt.Sprintf("%s container %q", w, c.Name)
	if init {
		where = fmt.Sprintf("%s initContainer %q", w, c.Name)
	}
	if !IsTallyImage(c.Image) {
		p.cfg.Logf("skipped %s: image %s is not tally's; it runs outside this test: %.60q", where, c.Image, strings.Join(append(c.Command, c.Args...), " "))
		return nil, nil
	}
	cc := &container{w: w, c: c, init: init, env: map[string]string{}, name: fmt.Sprintf("%s/%s/%s", w.Namespace, w.id(), c.Name)}
	cc.root = filepath.Join(w.dir, "root-"+c.Name)
	for _, m := range c.VolumeMounts {
		src, ok := w.volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("%s volumeMount %s: the pod has no volume of that name", where, m.Name)
		}
		if err := copyTree(filepath.Join(src, m.SubPath), filepath.Join(cc.root, m.MountPath)); err != nil {
			return nil, err
		}
	}
	// Environment, as the kubelet makes it: envFrom, then env in order,
	// each value's $(VAR) expanded against what was defined before it.
	set := func(k, v string) {
		if _, ok := cc.env[k]; !ok {
			cc.envOrder = append(cc.envOrder, k)
		}
		cc.env[k] = v
	}
	for _, ef := range c.EnvFrom {
		data, err := p.envFrom(w, c.Name, ef)
		if err != nil {
			return nil, fmt.Errorf("%s envFrom: %w", where, err)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, cc.env))
			continue
		}
		v, ok, err := p.valueFrom(w, c, e)
		if err != nil {
			return nil, fmt.Errorf("%s env %s: %w", where, e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	// The rewrite of what names Kubernetes' network and files.
	cc.raw = map[string]string{}
	for k, v := range cc.env {
		cc.raw[k] = v
	}
	for _, k := range cc.envOrder {
		v, err := p.rewrite(cc, k, cc.env[k])
		if err != nil {
			return nil, fmt.Errorf("%s env %s: %w", where, k, err)
		}
		cc.env[k] = v
	}
	if kc := w.kubeconfig; kc != "" && p.cfg.KubeconfigEnv != "" {
		p.cfg.Logf("%s: the pod mounts its service account's token: %s=%s, the Kubernetes API of this test", where, p.cfg.KubeconfigEnv, kc)
		set(p.cfg.KubeconfigEnv, kc)
	}
	if p.cfg.ExtraEnv != nil {
		for k, v := range p.cfg.ExtraEnv(w, c.Name) {
			p.cfg.Logf("%s: test adds %s=%s", where, k, v)
			set(k, v)
		}
	}
	var argv []string
	if len(c.Command) > 0 {
		cmd0 := expand(c.Command[0], cc.env)
		if path.Base(cmd0) != "tally" && cmd0 != p.cfg.Entrypoint {
			return nil, fmt.Errorf("%s command %q: not the tally binary (the image has no shell)", where, c.Command)
		}
		argv = append(argv, c.Command[1:]...)
	}
	argv = append(argv, c.Args...)
	for _, a := range argv {
		a = expand(a, cc.env)
		a, err := p.rewrite(cc, "", a)
		if err != nil {
			return nil, fmt.Errorf("%s args: %w", where, err)
		}
		cc.args = append(cc.args, a)
	}
	// Every port must have been moved: a process listening on the
	// container's own port number would collide with the next pod's.
	for _, cp := range c.Ports {
		moved := false
		want := "127.0.0.1:" + strconv.Itoa(w.ports[cp.ContainerPort])
		for _, v := range cc.env {
			moved = moved || v == want
		}
		for _, a := range cc.args {
			moved = moved || strings.HasSuffix(a, want)
		}
		if !moved {
			return nil, fmt.Errorf("%s port %d (%s): no listen address in its env or args names it (say TALLY_ADDR=\":%d\"), so the test cannot move it to a free port",
				where, cp.ContainerPort, cp.Name, cp.ContainerPort)
		}
	}
	return cc, nil
}

func (p *Platform) envFrom(w *Workload, ctr string, ef corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case ef.ConfigMapRef != nil:
		cm := p.configMapIn(w, ef.ConfigMapRef.Name)
		if cm == nil {
			if ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
				return out, nil
			}
			return nil, fmt.Errorf("configMapRef %s: no such ConfigMap rendered in namespace %s", ef.ConfigMapRef.Name, w.Namespace)
		}
		for k, v := range configMapData(cm) {
			out[k] = string(v)
		}
	case ef.SecretRef != nil:
		s := p.secretIn(w, ef.SecretRef.Name)
		if s == nil {
			if ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
				return out, nil
			}
			return nil, fmt.Errorf("secretRef %s: the Secret is not rendered, and envFrom of a Secret created outside the manifests hides which keys it needs", ef.SecretRef.Name)
		}
		for k, v := range secretData(s) {
			out[k] = string(v)
		}
	}
	return out, nil
}

func (p *Platform) valueFrom(w *Workload, c corev1.Container, e corev1.EnvVar) (string, bool, error) {
	vf := e.ValueFrom
	switch {
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		if s := p.secretIn(w, ref.Name); s != nil {
			v, ok := secretData(s)[ref.Key]
			if !ok && !optional {
				return "", false, fmt.Errorf("secretKeyRef %s/%s: the rendered Secret has no key %q", ref.Name, ref.Key, ref.Key)
			}
			return string(v), ok, nil
		}
		if p.cfg.Secret != nil {
			if v, ok := p.cfg.Secret(SecretRef{Overlay: w.Overlay.Dir, Namespace: w.Namespace, Name: ref.Name, Key: ref.Key, Env: e.Name, Workload: w.Name}); ok {
				return v, true, nil
			}
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secretKeyRef %s key %s: no Secret of that name is rendered in namespace %s, and the test knows of no operator-created secret that fills %s",
			ref.Name, ref.Key, w.Namespace, e.Name)
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm := p.configMapIn(w, ref.Name)
		if cm == nil {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configMapKeyRef %s: no such ConfigMap rendered in namespace %s", ref.Name, w.Namespace)
		}
		v, ok := configMapData(cm)[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("configMapKeyRef %s: the rendered ConfigMap has no key %q", ref.Name, ref.Key)
		}
		return string(v), ok, nil
	case vf.FieldRef != nil:
		switch vf.FieldRef.FieldPath {
		case "metadata.name":
			return w.PodName, true, nil
		case "metadata.namespace":
			return w.Namespace, true, nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", true, nil
		case "spec.nodeName":
			return "node-1", true, nil
		case "spec.serviceAccountName":
			return w.Pod.Spec.ServiceAccountName, true, nil
		}
		if v, ok := strings.CutPrefix(vf.FieldRef.FieldPath, "metadata.labels['"); ok {
			return w.Pod.Labels[strings.TrimSuffix(v, "']")], true, nil
		}
		return "", false, fmt.Errorf("fieldRef %s: not known to the test", vf.FieldRef.FieldPath)
	case vf.ResourceFieldRef != nil:
		ref := vf.ResourceFieldRef
		var q resource.Quantity
		var ok bool
		switch {
		case strings.HasPrefix(ref.Resource, "limits."):
			q, ok = c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
		case strings.HasPrefix(ref.Resource, "requests."):
			q, ok = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "requests."))]
		}
		if !ok {
			// Kubernetes gives the node's allocatable without a limit.
			return "", false, fmt.Errorf("resourceFieldRef %s: the container sets no such resource", ref.Resource)
		}
		div := ref.Divisor
		if div.IsZero() {
			div = resource.MustParse("1")
		}
		// Rounded up, as the kubelet does.
		n := (q.MilliValue() + div.MilliValue() - 1) / div.MilliValue()
		return strconv.FormatInt(n, 10), true, nil
	}
	return "", false, errors.New("valueFrom of a kind the test does not know")
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand resolves $(VAR) as Kubernetes does: a defined variable is
// replaced, an undefined reference stays as written, $$ is a $.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

var (
	listenRe  = regexp.MustCompile(`^(?:0\.0\.0\.0|\[::\])?:(\d+)$`)
	podAddrRe = regexp.MustCompile(`^127\.0\.0\.1:(\d+)$`)
	urlRe     = regexp.MustCompile(`([a-z][a-z0-9+.-]*)://([A-Za-z0-9.-]+)(?::(\d+))?`)
	svcRe     = regexp.MustCompile(`\b([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(?:\.cluster\.local)?\.?(?::(\d+))?`)
	pathRe    = regexp.MustCompile(`(^|[=,\s])(/[A-Za-z0-9._/-]*)`)
)

// rewrite maps one environment value or argument onto this machine.
func (p *Platform) rewrite(cc *container, env, v string) (string, error) {
	w := cc.w
	prefix := ""
	if i := strings.Index(v, "="); strings.HasPrefix(v, "-") && i > 0 { // --flag=value
		prefix, v = v[:i+1], v[i+1:]
	}
	// The pod's own IP (status.podIP, 127.0.0.1 here) and one of its
	// ports, as a pod advertises itself: that port's local one.
	if m := podAddrRe.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		if port, ok := w.ports[int32(n)]; ok {
			return prefix + "127.0.0.1:" + strconv.Itoa(port), nil
		}
	}
	if m := listenRe.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		port, ok := w.ports[int32(n)]
		if !ok {
			var err error
			if port, err = freePort(); err != nil {
				return "", err
			}
			w.ports[int32(n)] = port
			p.cfg.Logf("%s listens on %s, which no containerPort declares", w, v)
		}
		return prefix + "127.0.0.1:" + strconv.Itoa(port), nil
	}
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		u, err := p.database(cc, env, v)
		return prefix + u, err
	}
	var rerr error
	out := urlRe.ReplaceAllStringFunc(v, func(m string) string {
		sm := urlRe.FindStringSubmatch(m)
		scheme, host, portStr := sm[1], sm[2], sm[3]
		port, _ := strconv.Atoi(portStr)
		addr, ok, err := p.resolve(w.scope, w.Namespace, host, port, scheme)
		if err != nil {
			rerr = fmt.Errorf("%q: %w", v, err)
			return m
		}
		if !ok {
			return m
		}
		return scheme + "://" + addr
	})
	if !strings.Contains(v, "://") {
		out = svcRe.ReplaceAllStringFunc(out, func(m string) string {
			sm := svcRe.FindStringSubmatch(m)
			port, _ := strconv.Atoi(sm[5])
			addr, _, err := p.resolve(w.scope, w.Namespace, strings.TrimSuffix(strings.SplitN(m, ":", 2)[0], "."), port, "")
			if err != nil {
				rerr = fmt.Errorf("%q: %w", v, err)
				return m
			}
			return addr
		})
	}
	if rerr != nil {
		return "", rerr
	}
	return prefix + cc.localPaths(out), nil
}

// localPath maps an absolute path of the container's file system that is
// a mount, under one or above one, onto the container's root here.
func (cc *container) localPath(f string) (string, bool) {
	f = path.Clean(f)
	for _, m := range cc.c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if f == mp || strings.HasPrefix(f, mp+"/") || strings.HasPrefix(mp, f+"/") {
			return filepath.Join(cc.root, f), true
		}
	}
	return f, false
}

func (cc *container) localPaths(v string) string {
	return pathRe.ReplaceAllStringFunc(v, func(m string) string {
		sm := pathRe.FindStringSubmatch(m)
		if l, ok := cc.localPath(sm[2]); ok {
			return sm[1] + l
		}
		return m
	})
}

func (p *Platform) database(cc *container, env, raw string) (string, error) {
	w := cc.w
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	q := u.Query()
	// The files a verify-full connection needs must be mounted.
	for _, k := range []string{"sslrootcert", "sslcert", "sslkey"} {
		f := q.Get(k)
		if f == "" {
			continue
		}
		local, ok := cc.localPath(f)
		if !ok {
			return "", fmt.Errorf("database URL's %s=%s: no volumeMount of container %q holds that path", k, f, cc.c.Name)
		}
		if _, err := os.Stat(local); err != nil {
			return "", fmt.Errorf("database URL's %s=%s: the volume mounted there has no such file", k, f)
		}
	}
	// Its host must be something this cluster resolves.
	if h := u.Hostname(); h != "127.0.0.1" {
		where, err := p.exists(w.scope, w.Namespace, h)
		if err != nil {
			return "", fmt.Errorf("database URL's host %s: %w", h, err)
		}
		p.cfg.Logf("%s: database host %s is %s", cc.name, h, where)
	}
	if p.cfg.Database == nil {
		return "", errors.New("a database URL, and the test gives no local database")
	}
	return p.cfg.Database(DatabaseRef{Overlay: w.Overlay.Dir, Namespace: w.Namespace, Workload: w.Name, Env: env, URL: u})
}

const externalDNS = "external-dns.alpha.kubernetes.io/hostname"

// service finds what a host names from a pod of namespace ns in scope: a
// Service by its DNS name in the cluster (name, name.ns, name.ns.svc,
// name.ns.svc.cluster.local), or any Service of the platform that
// external-dns publishes under that name. internal reports a cluster name:
// not finding it is an error, where a name outside may be on the internet.
func (p *Platform) service(scope, ns, host string) (s *corev1.Service, sscope string, internal bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name, sns := "", ns
	labels := strings.Split(host, ".")
	switch {
	case len(labels) == 1:
		name = host
	case len(labels) == 2 && p.namespace(scope, labels[1]):
		name, sns = labels[0], labels[1]
	case len(labels) == 3 && labels[2] == "svc", strings.HasSuffix(host, ".svc.cluster.local") && len(labels) == 5:
		name, sns = labels[0], labels[1]
	}
	if name != "" {
		for _, r := range p.cfg.Overlays {
			if p.scopeOf(r) != scope {
				continue
			}
			for _, s := range r.Services {
				if s.Name == name && s.Namespace == sns {
					return s, scope, true
				}
			}
		}
		return nil, "", true
	}
	for _, r := range p.cfg.Overlays {
		for _, s := range r.Services {
			for _, h := range strings.Split(s.Annotations[externalDNS], ",") {
				if strings.TrimSpace(h) == host {
					return s, p.scopeOf(r), false
				}
			}
		}
	}
	return nil, "", false
}

func (p *Platform) namespace(scope, ns string) bool {
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) != scope {
			continue
		}
		for _, o := range r.Objects {
			if o.Namespace == ns {
				return true
			}
		}
	}
	return false
}

// exists says what a host names, or why it names nothing.
func (p *Platform) exists(scope, ns, host string) (string, error) {
	s, _, internal := p.service(scope, ns, host)
	if s != nil {
		return "Service " + s.Namespace + "/" + s.Name, nil
	}
	if why, ok := p.cfg.External[externalKey(host, ns)]; ok {
		return "outside the manifests (" + why + ")", nil
	}
	if internal {
		return "", fmt.Errorf("no Service of that name in namespace %s of this Kubernetes cluster (%s)", ns, scope)
	}
	return "", fmt.Errorf("no Service publishes that name (%s annotation)", externalDNS)
}

func externalKey(host, ns string) string {
	labels := strings.Split(host, ".")
	if len(labels) == 1 {
		return host + "." + ns
	}
	return labels[0] + "." + labels[1]
}

// resolve maps host:port, as a pod of namespace ns in scope reaches it,
// to the local address of the booted pod behind it. ok is false for a
// name on the internet, left as it is.
func (p *Platform) resolve(scope, ns, host string, port int, scheme string) (string, bool, error) {
	s, sscope, internal := p.service(scope, ns, host)
	if s == nil {
		if why, ok := p.cfg.External[externalKey(host, ns)]; ok && internal {
			p.cfg.Logf("service %s is outside the manifests (%s): a local port nothing listens on stands for it", host, why)
			return "127.0.0.1:" + strconv.Itoa(closedPort()), true, nil
		}
		if internal {
			return "", false, fmt.Errorf("service %s: no Service of that name in namespace %s of this Kubernetes cluster (%s)", host, ns, scope)
		}
		return "", false, nil
	}
	key := s.Namespace + "/" + s.Name
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		addr, ok, err := p.resolve(sscope, s.Namespace, s.Spec.ExternalName, port, scheme)
		if err == nil && !ok {
			err = fmt.Errorf("service %s is an ExternalName for %s, which no Service of the platform publishes (%s)", key, s.Spec.ExternalName, externalDNS)
		}
		return addr, err == nil, err
	}
	var sp *corev1.ServicePort
	for i := range s.Spec.Ports {
		if port == 0 && len(s.Spec.Ports) == 1 || int(s.Spec.Ports[i].Port) == port ||
			port == 0 && (scheme == "http" && s.Spec.Ports[i].Port == 80 || scheme == "https" && s.Spec.Ports[i].Port == 443) {
			sp = &s.Spec.Ports[i]
			break
		}
	}
	if sp == nil {
		return "", false, fmt.Errorf("service %s has no port %d", key, port)
	}
	for _, w := range p.workloads {
		if w.scope != sscope || w.Namespace != s.Namespace || w.Kind != "Deployment" || !selects(s.Spec.Selector, w.Pod.Labels) {
			continue
		}
		cp, err := targetPort(w, sp.TargetPort, sp.Port)
		if err != nil {
			return "", false, fmt.Errorf("service %s port %d: %w", key, sp.Port, err)
		}
		return "127.0.0.1:" + strconv.Itoa(w.ports[cp]), true, nil
	}
	if p.cfg.Filter != nil { // booting a part: what is left out is not there
		return "127.0.0.1:" + strconv.Itoa(closedPort()), true, nil
	}
	return "", false, fmt.Errorf("service %s selects %v, which no booted Deployment's pods carry (it has no endpoints)", key, s.Spec.Selector)
}

// copyTree copies the files under src to dst (a missing src is an empty
// volume).
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
}

var (
	closedOnce sync.Once
	closed     int
)

// closedPort is a local port nothing listens on.
func closedPort() int {
	closedOnce.Do(func() { closed, _ = freePort() })
	return closed
}

func selects(sel map[string]string, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// targetPort is the container port a Service's targetPort names.
func targetPort(w *Workload, tp intstr.IntOrString, port int32) (int32, error) {
	if tp.Type == intstr.Int {
		if tp.IntVal == 0 {
			return port, nil
		}
		return tp.IntVal, nil
	}
	for _, c := range w.Pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == tp.StrVal {
				return cp.ContainerPort, nil
			}
		}
	}
	return 0, fmt.Errorf("targetPort %q: no container of %s has a port of that name", tp.StrVal, w)
}

func probePort(w *Workload, c corev1.Container, port intstr.IntOrString) (int32, error) {
	if port.Type == intstr.Int {
		return port.IntVal, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %q: container %q has no port of that name", port.StrVal, c.Name)
}

// volumes materialises the pod's volumes under its directory.
func (p *Platform) volumes(w *Workload) error {
	for _, v := range w.Pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		w.volumes[v.Name] = dir
		var err error
		switch {
		case v.Secret != nil:
			err = p.secretVolume(w, dir, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.ConfigMap != nil:
			err = p.configMapVolume(w, dir, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.Secret != nil:
					err = errors.Join(err, p.secretVolume(w, dir, s.Secret.Name, s.Secret.Items, s.Secret.Optional))
				case s.ConfigMap != nil:
					err = errors.Join(err, p.configMapVolume(w, dir, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional))
				}
			}
		case v.EmptyDir != nil:
		default:
			p.cfg.Logf("%s volume %s: a kind the test leaves empty", w, v.Name)
		}
		if err != nil {
			return fmt.Errorf("%s volume %s: %w", w, v.Name, err)
		}
	}
	return nil
}

func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("item %s: no such key", it.Key)
		}
		f := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, v, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (p *Platform) configMapVolume(w *Workload, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	cm := p.configMapIn(w, name)
	if cm == nil {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("configMap %s: not rendered in namespace %s", name, w.Namespace)
	}
	return writeItems(dir, configMapData(cm), items)
}

func (p *Platform) secretVolume(w *Workload, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	if s := p.secretIn(w, name); s != nil {
		return writeItems(dir, secretData(s), items)
	}
	// A Secret cert-manager writes from a rendered Certificate.
	for _, o := range p.findIn(w, "cert-manager.io/Certificate") {
		m := o.Map()
		spec, _ := m["spec"].(map[string]any)
		if spec == nil || spec["secretName"] != name || o.Namespace != w.Namespace {
			continue
		}
		var names []string
		for _, n := range asList(spec["dnsNames"]) {
			names = append(names, n)
		}
		if cn, _ := spec["commonName"].(string); cn != "" && len(names) == 0 {
			names = append(names, cn)
		}
		crt, key, err := p.cfg.CA.Issue(names...)
		if err != nil {
			return err
		}
		p.cfg.Logf("%s: secret %s is written by %s: a test certificate for %v", w, name, o, names)
		return writeItems(dir, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": p.cfg.CA.PEM}, items)
	}
	if optional != nil && *optional {
		return nil
	}
	// Any other: the operator's (say CockroachDB's client certificates):
	// test certificates under the names its items ask for.
	data := map[string][]byte{}
	keys := []string{"ca.crt", "tls.crt", "tls.key"}
	if len(items) > 0 {
		keys = nil
		for _, it := range items {
			keys = append(keys, it.Key)
		}
	}
	crt, key, err := p.cfg.CA.Issue(name)
	if err != nil {
		return err
	}
	for _, k := range keys {
		switch {
		case k == "ca.crt":
			data[k] = p.cfg.CA.PEM
		case strings.HasSuffix(k, ".key"):
			data[k] = key
		case strings.HasSuffix(k, ".crt"):
			data[k] = crt
		default:
			if p.cfg.Secret == nil {
				return fmt.Errorf("secret %s key %s: not rendered, and not a certificate", name, k)
			}
			v, ok := p.cfg.Secret(SecretRef{Overlay: w.Overlay.Dir, Namespace: w.Namespace, Name: name, Key: k, Workload: w.Name})
			if !ok {
				return fmt.Errorf("secret %s key %s: not rendered, not a certificate, and unknown to the test", name, k)
			}
			data[k] = []byte(v)
		}
	}
	p.cfg.Logf("%s: secret %s is not rendered (the operator creates it): test files %v", w, name, keys)
	return writeItems(dir, data, nil)
}

func asList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// run starts the workloads: Jobs to completion, then every pod's init
// containers in order, then the pods' containers, then waits for them to
// be ready.
func (p *Platform) run(ctx context.Context) error {
	for _, r := range p.cfg.Overlays {
		var jobs, deps []*Workload
		for _, w := range p.workloads {
			if w.Overlay != r {
				continue
			}
			if w.Kind == "Job" {
				jobs = append(jobs, w)
			} else {
				deps = append(deps, w)
			}
		}
		for _, w := range jobs {
			for _, c := range p.planned[w] {
				if err := p.complete(ctx, c); err != nil {
					return err
				}
			}
		}
		var g errGroup
		for _, w := range deps {
			g.Go(func() error {
				p.podPhase(w, podScheduled)
				var long []*container
				for _, c := range p.planned[w] {
					if c.init {
						if err := p.complete(ctx, c); err != nil {
							return err
						}
						continue
					}
					long = append(long, c)
				}
				for _, c := range long {
					if err := p.start(c); err != nil {
						return err
					}
				}
				p.podPhase(w, podRunning)
				for _, c := range long {
					if err := p.ready(ctx, c); err != nil {
						return err
					}
				}
				p.podPhase(w, podReady)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

type errGroup struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (g *errGroup) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	}()
}

func (g *errGroup) Wait() error { g.wg.Wait(); return errors.Join(g.errs...) }

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	stop bool // stopped by the test
	mu   sync.Mutex
}

func (p *Platform) spawn(c *container) (*proc, error) {
	logPath := filepath.Join(p.cfg.Dir, "logs", strings.ReplaceAll(c.name, "/", "_")+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.cfg.Binary, c.args...)
	// Exactly the container's environment: nothing of the test's own.
	cmd.Env = []string{}
	for _, k := range c.envOrder {
		cmd.Env = append(cmd.Env, k+"="+c.env[k])
	}
	cmd.Dir = c.w.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start: %w", c.name, err)
	}
	pr := &proc{name: c.name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		f.Close()
		close(pr.done)
	}()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	c.proc = pr
	p.cfg.Logf("started %s: tally %s", c.name, strings.Join(c.args, " "))
	return pr, nil
}

// complete runs an init container or a Job's container to completion.
func (p *Platform) complete(ctx context.Context, c *container) error {
	pr, err := p.spawn(c)
	if err != nil {
		return err
	}
	select {
	case <-pr.done:
	case <-time.After(60 * time.Second):
		_ = pr.cmd.Process.Kill()
		<-pr.done
		return fmt.Errorf("%s did not finish within 60 s\n%s", c.name, pr.tail())
	case <-ctx.Done():
		_ = pr.cmd.Process.Kill()
		<-pr.done
		return ctx.Err()
	}
	if pr.err != nil {
		return fmt.Errorf("%s (%s) failed: %v\n%s", c.name, kindOf(c), pr.err, pr.tail())
	}
	return nil
}

func kindOf(c *container) string {
	if c.init {
		return "initContainer of " + c.w.String()
	}
	return c.w.String()
}

func (p *Platform) start(c *container) error {
	_, err := p.spawn(c)
	return err
}

// ready polls the container's readiness probe until it answers, and
// checks its liveness probe once then.
func (p *Platform) ready(ctx context.Context, c *container) error {
	probe := c.c.ReadinessProbe
	if probe == nil {
		p.cfg.Logf("%s has no readinessProbe: waiting only to see it does not exit", c.name)
		select {
		case <-c.proc.done:
			return p.exited(c)
		case <-time.After(time.Second):
			return nil
		}
	}
	deadline := time.Now().Add(p.cfg.ReadyTimeout)
	var last string
	for {
		select {
		case <-c.proc.done:
			return p.exited(c)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		ok, what := p.probe(c, probe)
		if ok {
			break
		}
		last = what
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (%s) never became ready within %v: readinessProbe %s\n%s", c.name, kindOf(c), p.cfg.ReadyTimeout, last, c.proc.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.cfg.Logf("%s is ready", c.name)
	if lp := c.c.LivenessProbe; lp != nil {
		if ok, what := p.probe(c, lp); !ok {
			return fmt.Errorf("%s: ready, but its livenessProbe fails: %s (the kubelet would restart it)\n%s", c.name, what, c.proc.tail())
		}
	}
	return nil
}

func (p *Platform) exited(c *container) error {
	return fmt.Errorf("%s (%s) exited: %v (Kubernetes would restart it, and it would crash-loop)\n%s", c.name, kindOf(c), c.proc.err, c.proc.tail())
}

// probe runs one probe: true when it passes, else what it saw.
func (p *Platform) probe(c *container, pr *corev1.Probe) (bool, string) {
	switch {
	case pr.HTTPGet != nil:
		port, err := probePort(c.w, c.c, pr.HTTPGet.Port)
		if err != nil {
			return false, err.Error()
		}
		local, ok := c.w.ports[port]
		if !ok {
			return false, fmt.Sprintf("port %d is not a port of the pod", port)
		}
		scheme := "http"
		if pr.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		u := fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, local, pr.HTTPGet.Path)
		req, _ := http.NewRequest("GET", u, nil)
		for _, h := range pr.HTTPGet.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		// The kubelet does not verify certificates.
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		res, err := client.Do(req)
		if err != nil {
			return false, fmt.Sprintf("GET %s (port %d): %v", pr.HTTPGet.Path, port, err)
		}
		defer res.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		if res.StatusCode >= 200 && res.StatusCode < 400 {
			return true, ""
		}
		return false, fmt.Sprintf("GET %s (port %d): %d %s", pr.HTTPGet.Path, port, res.StatusCode, strings.TrimSpace(b.String()))
	case pr.TCPSocket != nil:
		port, err := probePort(c.w, c.c, pr.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.w.ports[port]), time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}
	return false, "a probe of a kind the test does not run (exec needs a shell the image has not)"
}

func (pr *proc) tail() string {
	b, _ := os.ReadFile(pr.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "--- log of " + pr.name + " ---\n" + string(b)
}

// Err reports a long-running container that exited since the boot.
func (p *Platform) Err() error {
	var errs []error
	for _, c := range p.containers() {
		if c.init || c.w.Kind == "Job" || c.proc == nil {
			continue
		}
		select {
		case <-c.proc.done:
			c.proc.mu.Lock()
			stopped := c.proc.stop
			c.proc.mu.Unlock()
			if !stopped {
				errs = append(errs, p.exited(c))
			}
		default:
		}
	}
	return errors.Join(errs...)
}

func (p *Platform) containers() []*container {
	var out []*container
	for _, w := range p.workloads {
		out = append(out, p.planned[w]...)
	}
	return out
}

// Close stops every process (SIGTERM, then SIGKILL after 5 s).
func (p *Platform) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.procs {
			pr.mu.Lock()
			pr.stop = true
			pr.mu.Unlock()
			_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, pr := range p.procs {
			select {
			case <-pr.done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
				<-pr.done
			}
		}
		for _, a := range p.apis {
			a.srv.Close()
		}
	})
}

// Container is a booted container's view for the test: its final
// environment and arguments.
type Container struct {
	Workload *Workload
	Name     string
	Args     []string
	Env      map[string]string
	// RawEnv is the environment as the manifests make it, before the
	// rewrite onto this machine.
	RawEnv map[string]string
}

// Containers lists the long-running containers booted (not init
// containers, not Jobs).
func (p *Platform) Containers() []Container {
	var out []Container
	for _, c := range p.containers() {
		if c.init || c.w.Kind == "Job" {
			continue
		}
		env := map[string]string{}
		for k, v := range c.env {
			env[k] = v
		}
		out = append(out, Container{Workload: c.w, Name: c.c.Name, Args: c.args, Env: env, RawEnv: c.raw})
	}
	return out
}

// Rewrite maps a value written for the Kubernetes cluster of overlay r
// (a service URL, say) onto this machine, as it maps the containers'.
func (p *Platform) Rewrite(r *Rendered, namespace, v string) (string, error) {
	w := &Workload{Overlay: r, Namespace: namespace, scope: p.scopeOf(r), ports: map[int32]int{}, volumes: map[string]string{}}
	return p.rewrite(&container{w: w}, "", v)
}

// ServiceAddr is the local address of a Service's port in overlay r.
func (p *Platform) ServiceAddr(r *Rendered, name, namespace string, port int) (string, error) {
	a, _, err := p.resolve(p.scopeOf(r), namespace, name, port, "")
	return a, err
}

// ServiceFor is the in-cluster host:port (name.ns.svc:port) of a Service
// that reaches containerPort of w's pods, and its local address.
func (p *Platform) ServiceFor(w *Workload, containerPort int32) (inCluster, local string, err error) {
	for _, s := range w.Overlay.Services {
		if s.Namespace != w.Namespace || !selects(s.Spec.Selector, w.Pod.Labels) {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if cp, err := targetPort(w, sp.TargetPort, sp.Port); err == nil && cp == containerPort {
				return fmt.Sprintf("%s.%s.svc:%d", s.Name, s.Namespace, sp.Port), "127.0.0.1:" + strconv.Itoa(w.ports[cp]), nil
			}
		}
	}
	return "", "", fmt.Errorf("no Service of %s reaches its container port %d", w, containerPort)
}

// LB is one port of a LoadBalancer Service, and where it is served locally.
type LB struct {
	Service *corev1.Service
	Port    corev1.ServicePort
	Local   string
}

// LoadBalancers lists the ports of overlay r's LoadBalancer Services
// that reach a booted pod.
func (p *Platform) LoadBalancers(r *Rendered) []LB {
	var out []LB
	for _, s := range r.Services {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if a, ok, err := p.resolve(p.scopeOf(r), s.Namespace, s.Name, int(sp.Port), ""); err == nil && ok {
				out = append(out, LB{Service: s, Port: sp, Local: a})
			}
		}
	}
	return out
}

// Run runs the tally binary with args and env, as an operator's one-off
// command (tally admin …), and returns its standard output.
func (p *Platform) Run(env map[string]string, args ...string) ([]byte, error) {
	cmd := exec.Command(p.cfg.Binary, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("tally %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Logs is where the processes' logs are.
func (p *Platform) Logs() string { return filepath.Join(p.cfg.Dir, "logs") }

var (
	portMu   sync.Mutex
	portNext = 20000 + int(time.Now().UnixNano()%6000)
	portUsed = map[int]bool{}
)

// freePort is a local port nothing listens on, below Linux's ephemeral
// range (32768 and up): a port from that range, closed again until the
// process it is for starts, may meanwhile be the source port of any
// outgoing connection (the databases', say).
func freePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for i := 0; i < 12000; i++ {
		port := portNext
		portNext++
		if portNext >= 32000 {
			portNext = 20000
		}
		if portUsed[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		portUsed[port] = true
		return port, nil
	}
	return 0, errors.New("no free port below 32000")
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '.' {
			return '_'
		}
		return r
	}, s)
}

// secretIn finds a Secret of w's namespace rendered by any overlay of its
// Kubernetes cluster (the control plane uses what its region's overlay
// renders, say).
func (p *Platform) secretIn(w *Workload, name string) *corev1.Secret {
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) == w.scope {
			if s := r.secret(w.Namespace, name); s != nil {
				return s
			}
		}
	}
	return nil
}

func (p *Platform) configMapIn(w *Workload, name string) *corev1.ConfigMap {
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) == w.scope {
			if c := r.configMap(w.Namespace, name); c != nil {
				return c
			}
		}
	}
	return nil
}

func (p *Platform) findIn(w *Workload, kind string) []Object {
	var out []Object
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) == w.scope {
			out = append(out, r.Find(kind)...)
		}
	}
	return out
}
