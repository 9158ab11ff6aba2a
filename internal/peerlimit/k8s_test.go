package peerlimit

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tallyhq/tally/internal/kubefake"
)

// The manifests' RBAC for the router (deploy/base/router.yaml): its
// service account may list and watch pods in its namespace, nothing
// else.
func routerRBAC(ns string) kubefake.RBAC {
	return kubefake.RBAC{
		Roles: []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Name: "tally-router-peers", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}}}},
		RoleBindings: []rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "tally-router-peers", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tally-router-peers"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tally-router", Namespace: ns}}}},
	}
}

// kubeEnv is a fake Kubernetes API and the router replicas it lists.
type kubeEnv struct {
	t          *testing.T
	api        *kubefake.Server
	kubeconfig string
	ls         []*Limiter
}

func newKubeEnv(t *testing.T) *kubeEnv {
	api := kubefake.Start()
	t.Cleanup(api.Close)
	api.Authorize = routerRBAC("tally").Authorize
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := api.WriteKubeconfig(kc, "tally", kubefake.ServiceAccountUser("tally", "tally-router")); err != nil {
		t.Fatal(err)
	}
	return &kubeEnv{t: t, api: api, kubeconfig: kc}
}

// start starts a replica with Kubernetes discovery; its pod is not in the
// API until put says so.
func (e *kubeEnv) start(syncWait time.Duration) *Limiter {
	e.t.Helper()
	l, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", Deadline: time.Second,
		K8s: &K8s{Selector: "app=tally-router", PodIP: "127.0.0.1", Kubeconfig: e.kubeconfig, SyncWait: syncWait}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(l.Close)
	e.ls = append(e.ls, l)
	return l
}

// pod is router replica l's pod: its IP, and its peer listener declared
// as the container port named peer (each replica here has a port of its
// own on 127.0.0.1, where pods have an IP each and the same port).
func pod(name string, l *Limiter, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tally", Labels: map[string]string{"app": "tally-router"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "router", Ports: []corev1.ContainerPort{
			{Name: "https", ContainerPort: 8443}, {Name: "admin", ContainerPort: 9090}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if l != nil {
		host, port, _ := net.SplitHostPort(l.Addr())
		n, _ := strconv.Atoi(port)
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: PeerPortName, ContainerPort: int32(n)})
		p.Status.Phase, p.Status.PodIP = corev1.PodRunning, host
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// eventually waits for every replica of ls to see the ring want.
func (e *kubeEnv) eventually(ls []*Limiter, want []*Limiter) {
	e.t.Helper()
	var addrs []string
	for _, l := range want {
		addrs = append(addrs, l.Addr())
	}
	slices.Sort(addrs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for _, l := range ls {
			ok = ok && slices.Equal(l.Peers(), addrs)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for i, l := range ls {
				e.t.Logf("replica %d (%s) sees %v", i, l.Addr(), l.Peers())
			}
			e.t.Fatalf("the replicas never saw the ring %v", addrs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// owners are the owners of many addresses' counters, as replica l sees them.
func owners(t *testing.T, l *Limiter, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		p, err := l.inst.GetPeer(context.Background(), fmt.Sprintf("client_ip_p1|10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p.Info().GRPCAddress
	}
	return out
}

// The ring follows the router pods: ready pods with an IP join it, pods
// not ready (or without an IP, or of another app) do not, and a pod being
// deleted leaves it; every replica sees the same ring, and one address
// gets one limit across them. A replica joining takes only its share of
// the addresses from the others, and one leaving gives only its own to
// the rest (consistent hashing): the owners of 20,000 addresses before and
// after each change. The API is asked only what the manifests' Role
// grants: list and watch pods in the namespace.
func TestKubernetesRingFollowsTheReadyRouterPods(t *testing.T) {
	e := newKubeEnv(t)
	e.api.Put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "regional-0", Namespace: "tally", Labels: map[string]string{"app": "tally-regional"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "regional", Ports: []corev1.ContainerPort{{Name: PeerPortName, ContainerPort: 7070}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	var ls []*Limiter
	for i := range 3 {
		l := e.start(0)
		if err := l.Ready(); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		e.api.Put(pod(fmt.Sprintf("router-%d", i), l, true))
		ls = append(ls, l)
	}
	e.eventually(ls, ls)
	if got := roundRobin(ls, "p1|203.0.113.7", 15); got < 5 || got > 6 {
		t.Fatalf("%d of 15 allowed over three replicas of the ring from Kubernetes, want 5", got)
	}

	// A pod scheduled (no IP yet), then running but not ready: in no
	// other replica's ring, while its own ring counts it.
	fourth := e.start(0)
	e.api.Put(pod("router-3", nil, false))
	e.api.Put(pod("router-3", fourth, false))
	e.eventually([]*Limiter{fourth}, append(slices.Clone(ls), fourth))
	time.Sleep(200 * time.Millisecond) // what the others would need to take it in
	e.eventually(ls, ls)

	// Ready: it joins, and takes addresses only from the others, about a
	// quarter of them.
	const n = 20_000
	before := owners(t, ls[0], n)
	e.api.Update("tally", "router-3", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	all := append(slices.Clone(ls), fourth)
	e.eventually(all, all)
	after := owners(t, ls[0], n)
	if !slices.Equal(after, owners(t, fourth, n)) {
		t.Fatal("two replicas of one ring name different owners")
	}
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
			if after[i] != fourth.Addr() {
				t.Fatalf("an address moved from %s to %s, not to the replica that joined", before[i], after[i])
			}
		}
	}
	if f := float64(moved) / n; f < 0.15 || f > 0.35 {
		t.Fatalf("%.2f of the addresses moved to the fourth replica, want about 0.25", f)
	}
	t.Logf("a fourth replica joining took %d of %d addresses (%.1f%%); no other moved", moved, n, 100*float64(moved)/n)

	// A replica's pod is deleted (terminating, still serving its last
	// requests): the others drop it at once, and only its addresses move.
	gone := ls[1]
	before = after
	now := metav1.Now()
	e.api.Update("tally", "router-1", func(p *corev1.Pod) { p.DeletionTimestamp = &now })
	rest := []*Limiter{ls[0], ls[2], fourth}
	e.eventually(rest, rest)
	after = owners(t, ls[0], n)
	moved = 0
	for i := range before {
		if before[i] != after[i] {
			moved++
			if before[i] != gone.Addr() {
				t.Fatalf("an address of %s moved to %s when %s left", before[i], after[i], gone.Addr())
			}
		} else if after[i] == gone.Addr() {
			t.Fatalf("an address is still owned by the replica that left")
		}
	}
	if f := float64(moved) / n; f < 0.15 || f > 0.35 {
		t.Fatalf("%.2f of the addresses moved when one of four replicas left, want about 0.25", f)
	}
	t.Logf("a replica leaving gave %d of %d addresses (%.1f%%) to the others; no other moved", moved, n, 100*float64(moved)/n)
	e.api.Delete("tally", "router-1")
	gone.Close()
	// Still one limit for an address, and every check reached its owner.
	if got := roundRobin(rest, "p1|203.0.113.9", 15); got < 5 || got > 6 {
		t.Fatalf("%d of 15 allowed over the three replicas left, want 5", got)
	}
	for i, l := range rest {
		if n := l.FailedOpen("client"); n != 0 {
			t.Fatalf("replica %d failed open %v times", i, n)
		}
	}
	for _, a := range e.api.Requests() {
		if a.Refused != "" || a.Resource != "pods" || a.Namespace != "tally" || (a.Verb != "list" && a.Verb != "watch") {
			t.Fatalf("the API was asked %s, which the router's Role does not grant (%s)", a.Attributes, a.Refused)
		}
	}
}

// Without the right to list pods (RBAC missing) a replica starts as a
// ring of one and is not ready, saying why; once the Role is there, the
// informer's retry lists the pods and it joins the ring, ready.
func TestKubernetesRingIsNotReadyUntilThePodsAreListed(t *testing.T) {
	e := newKubeEnv(t)
	var granted atomic.Bool
	granted.Store(true)
	rbac := routerRBAC("tally")
	e.api.Authorize = func(a kubefake.Attributes) error {
		if !granted.Load() {
			return kubefake.ErrDenied
		}
		return rbac.Authorize(a)
	}
	first := e.start(0)
	e.api.Put(pod("router-0", first, true))
	granted.Store(false)
	l := e.start(300 * time.Millisecond)
	if err := l.Ready(); err == nil || !strings.Contains(err.Error(), "not listed") {
		t.Fatalf("ready without the pods listed: %v", err)
	}
	if ps := l.Peers(); len(ps) != 1 {
		t.Fatalf("the ring before any list: %v", ps)
	}
	granted.Store(true)
	e.api.Put(pod("router-1", l, true))
	e.eventually([]*Limiter{l}, []*Limiter{first, l})
	for deadline := time.Now().Add(time.Second); l.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listed, still not ready: %v", l.Ready())
		}
	}
}

// What Kubernetes discovery cannot start without is an error at start.
func TestKubernetesDiscoveryNeedsItsSettings(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "missing")
	for name, k := range map[string]K8s{
		"no pod IP":           {Selector: "app=tally-router", Kubeconfig: kc},
		"no selector":         {PodIP: "127.0.0.1", Kubeconfig: kc},
		"a bad selector":      {PodIP: "127.0.0.1", Selector: "app==(", Kubeconfig: kc},
		"no kubeconfig there": {PodIP: "127.0.0.1", Selector: "app=tally-router", Kubeconfig: kc},
		"not in a pod":        {PodIP: "127.0.0.1", Selector: "app=tally-router"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			l, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", K8s: &k})
			if err == nil {
				l.Close()
				t.Fatal("started")
			}
			t.Log(err)
		})
	}
}
