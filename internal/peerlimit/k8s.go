package peerlimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// K8s discovers the ring from the Kubernetes API: the pods of Namespace
// matching Selector, listed and watched (an informer; the pod's service
// account needs list and watch on pods in its namespace, nothing
// else), each reached at its pod IP on its container port named "peer"
// (PeerPortName), or on this replica's own peer port when it has none.
//
// A pod is a member when it is Ready, has an IP and is not being deleted.
// A pod not ready yet owns no counters in the others' rings: nothing says
// its peer listener is up until its readiness probe passes, and it gets
// no traffic from the Service meanwhile, so it has nothing to ask either
// (its own ring counts it, as every replica counts itself). A pod being
// deleted leaves the rings at once, while it still serves its last
// requests: its addresses move to their next owners before its listener
// closes, rather than failing open until its containers stop.
type K8s struct {
	// Namespace of the router pods (default: the kubeconfig context's,
	// else this pod's service account's namespace).
	Namespace string
	// Selector is a label selector of the router pods, e.g.
	// "app=tally-router".
	Selector string
	// PodIP is this pod's IP (the downward API's status.podIP): with the
	// peer port, this replica's address in the ring.
	PodIP string
	// Kubeconfig is a kubeconfig file to reach the API with (default: the
	// in-cluster configuration, the pod's service account token).
	Kubeconfig string
	// SyncWait bounds Start's wait for the first list of pods (default
	// 5s); until it comes, the ring is this replica alone and Ready says so.
	SyncWait time.Duration
}

// PeerPortName is the name of the container port a router pod's peer
// listener is declared as.
const PeerPortName = "peer"

// k8sRing follows the router pods.
type k8sRing struct {
	l        *Limiter
	informer cache.SharedIndexInformer
	kick     chan struct{}
	synced   atomic.Bool
	warnMu   sync.Mutex
	warned   time.Time
	port     string // this replica's peer port, for pods declaring none
}

func (l *Limiter) startK8s(ctx context.Context, k K8s) error {
	if k.PodIP == "" && l.cfg.Advertise == "" {
		return errors.New("peerlimit: kubernetes discovery needs this pod's IP ($POD_IP, the downward API's status.podIP)")
	}
	if k.Selector == "" {
		return errors.New("peerlimit: kubernetes discovery needs a label selector of the router pods")
	}
	sel, err := labels.Parse(k.Selector)
	if err != nil {
		return fmt.Errorf("peerlimit: label selector %q: %w", k.Selector, err)
	}
	rc, ns, err := restConfig(k)
	if err != nil {
		return fmt.Errorf("peerlimit: kubernetes discovery: %w", err)
	}
	rc.UserAgent = "tally-router (peer discovery)"
	client, err := corev1client.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("peerlimit: kubernetes client: %w", err)
	}
	_, port, _ := net.SplitHostPort(l.self)
	pods := client.Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel.String()
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel.String()
			return pods.Watch(ctx, o)
		},
	}
	r := &k8sRing{l: l, kick: make(chan struct{}, 1), port: port,
		informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})}
	_ = r.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		r.warn("peer discovery: listing or watching the router pods failed; the ring is kept as it was (the pod's service account needs list and watch on pods)",
			"namespace", ns, "selector", k.Selector, "err", err)
	})
	kick := func() {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return fmt.Errorf("peerlimit: %w", err)
	}
	l.k8s = r
	l.done.Add(2)
	go func() {
		defer l.done.Done()
		r.informer.RunWithContext(ctx)
	}()
	go func() {
		defer l.done.Done()
		r.follow(ctx)
	}()
	wait := k.SyncWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if cache.WaitForCacheSync(wctx.Done(), r.informer.HasSynced) {
		r.update() // the first ring, before Start returns
		r.synced.Store(true)
	} else {
		l.log.Warn("peer discovery: the router pods are not listed yet; a ring of one meanwhile, and not ready", "namespace", ns, "selector", k.Selector, "waited", wait)
	}
	return nil
}

// restConfig is the API's address and credentials, and the namespace the
// router pods are in.
func restConfig(k K8s) (*rest.Config, string, error) {
	if k.Kubeconfig != "" {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.Kubeconfig}, &clientcmd.ConfigOverrides{})
		rc, err := cc.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %w", k.Kubeconfig, err)
		}
		ns := k.Namespace
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, "", fmt.Errorf("kubeconfig %s: %w", k.Kubeconfig, err)
			}
		}
		return rc, ns, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%w (outside a pod, give a kubeconfig)", err)
	}
	ns := k.Namespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, "", fmt.Errorf("this pod's namespace: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	return rc, ns, nil
}

// follow sets the ring again whenever the pods change; events that come
// while it is being set are folded into one more update.
func (r *k8sRing) follow(ctx context.Context) {
	for {
		var poll <-chan time.Time
		if !r.synced.Load() { // the first list may complete after its events
			poll = time.After(100 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-poll:
		}
		if !r.informer.HasSynced() {
			continue // the first list is not complete: no partial ring
		}
		r.update()
		r.synced.Store(true)
	}
}

// update sets the ring to the member pods' addresses, when they changed.
func (r *k8sRing) update() {
	var addrs []string
	for _, o := range r.informer.GetStore().List() {
		if a, ok := member(o.(*corev1.Pod), r.port); ok {
			addrs = append(addrs, a)
		}
	}
	if changed := r.l.setPeersIfChanged(addrs); changed != nil {
		r.l.log.Info("peer discovery: the ring changed", "peers", changed)
	}
}

// member is the ring address of a pod that counts: Ready, with an IP, not
// being deleted; at its container port named "peer", else at port.
func member(p *corev1.Pod, port string) (string, bool) {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", false
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "", false
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == PeerPortName && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return net.JoinHostPort(p.Status.PodIP, port), true
}

// warn logs a discovery failure at most once a minute.
func (r *k8sRing) warn(msg string, args ...any) {
	r.warnMu.Lock()
	now := time.Now()
	if now.Sub(r.warned) < time.Minute {
		r.warnMu.Unlock()
		return
	}
	r.warned = now
	r.warnMu.Unlock()
	r.l.log.Warn(msg, args...)
}

// setPeersIfChanged sets the ring to addrs and this replica unless it is
// that already; it returns the new ring, nil when unchanged.
func (l *Limiter) setPeersIfChanged(addrs []string) []string {
	addrs = append(slices.Clone(addrs), l.self)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	l.setMu.Lock()
	defer l.setMu.Unlock()
	if slices.Equal(addrs, l.Peers()) {
		return nil
	}
	l.setPeersLocked(addrs)
	return addrs
}
