package deploytest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tallyhq/tally/internal/kubefake"
)

// kubeAPI is one Kubernetes cluster's API server (Config.KubeconfigEnv):
// internal/kubefake, serving the booted pods of the cluster's Deployments
// as the kubelet reports them (scheduled, running at their IP, ready once
// the readiness probe passed) and authorizing requests by the rendered
// Roles, ClusterRoles and their bindings. What differs from Kubernetes:
// every pod's IP is 127.0.0.1, so each declared container port is
// published as the local port that stands for it.
type kubeAPI struct {
	srv *kubefake.Server
}

// podSuffixes make the replicas' pod names.
var podSuffixes = []string{"x2kqp", "m4zrt", "q8wnd", "b6hvc", "t3jxl", "k7fsg"}

var apiMu sync.Mutex

// KubeAPI is the API server of overlay r's Kubernetes cluster (nil
// without Config.KubeconfigEnv, or before any pod of it booted).
func (p *Platform) KubeAPI(r *Rendered) *kubefake.Server {
	apiMu.Lock()
	defer apiMu.Unlock()
	if a := p.apis[p.scopeOf(r)]; a != nil {
		return a.srv
	}
	return nil
}

// api is scope's API server, started on first use.
func (p *Platform) api(scope string) (*kubeAPI, error) {
	apiMu.Lock()
	defer apiMu.Unlock()
	if a := p.apis[scope]; a != nil {
		return a, nil
	}
	var rbac kubefake.RBAC
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) != scope {
			continue
		}
		for _, o := range r.Objects {
			var err error
			switch o.APIVersion + "/" + o.Kind {
			case "rbac.authorization.k8s.io/v1/Role":
				err = json.Unmarshal(o.JSON, appended(&rbac.Roles))
			case "rbac.authorization.k8s.io/v1/RoleBinding":
				err = json.Unmarshal(o.JSON, appended(&rbac.RoleBindings))
			case "rbac.authorization.k8s.io/v1/ClusterRole":
				err = json.Unmarshal(o.JSON, appended(&rbac.ClusterRoles))
			case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
				err = json.Unmarshal(o.JSON, appended(&rbac.ClusterRoleBindings))
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
		}
	}
	a := &kubeAPI{srv: kubefake.Start()}
	a.srv.Authorize = rbac.Authorize
	if p.apis == nil {
		p.apis = map[string]*kubeAPI{}
	}
	p.apis[scope] = a
	p.cfg.Logf("Kubernetes cluster %s: its API at %s (%d Roles, %d RoleBindings, %d ClusterRoles, %d ClusterRoleBindings)",
		scope, a.srv.URL, len(rbac.Roles), len(rbac.RoleBindings), len(rbac.ClusterRoles), len(rbac.ClusterRoleBindings))
	return a, nil
}

// serviceAccount checks that the pod's service account exists (else
// Kubernetes creates no pod) and, when the pod mounts its token, writes it
// a kubeconfig for the token on its cluster's API.
func (p *Platform) serviceAccount(w *Workload) error {
	if p.cfg.KubeconfigEnv == "" {
		return nil
	}
	name := w.Pod.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	var sa *corev1.ServiceAccount
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) != w.scope {
			continue
		}
		for _, o := range r.Find("ServiceAccount") {
			if o.Name == name && o.Namespace == w.Namespace {
				sa = &corev1.ServiceAccount{}
				if err := json.Unmarshal(o.JSON, sa); err != nil {
					return fmt.Errorf("%s: %w", o, err)
				}
			}
		}
	}
	if sa == nil && name != "default" {
		return fmt.Errorf("%s serviceAccountName %s: no such ServiceAccount is rendered in namespace %s (Kubernetes would create no pod)", w, name, w.Namespace)
	}
	mount := true
	if sa != nil && sa.AutomountServiceAccountToken != nil {
		mount = *sa.AutomountServiceAccountToken
	}
	if w.Pod.Spec.AutomountServiceAccountToken != nil {
		mount = *w.Pod.Spec.AutomountServiceAccountToken
	}
	if !mount {
		return nil
	}
	a, err := p.api(w.scope)
	if err != nil {
		return err
	}
	w.kubeconfig = filepath.Join(w.dir, "kubeconfig")
	return a.srv.WriteKubeconfig(w.kubeconfig, w.Namespace, kubefake.ServiceAccountUser(w.Namespace, name))
}

type podState int

const (
	podScheduled podState = iota // its init containers run
	podRunning                   // its containers started
	podReady                     // every readiness probe passed
)

// podPhase publishes a Deployment's pod in its cluster's API, as the
// kubelet reports it.
func (p *Platform) podPhase(w *Workload, s podState) {
	if p.cfg.KubeconfigEnv == "" || w.Kind != "Deployment" {
		return
	}
	a, err := p.api(w.scope)
	if err != nil {
		p.cfg.Logf("%s: %v", w, err)
		return
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: w.PodName, Namespace: w.Namespace,
		Labels: w.Pod.Labels, Annotations: w.Pod.Annotations}, Spec: *w.Pod.Spec.DeepCopy()}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.NodeName = "node-1"
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if local, ok := w.ports[cs[i].Ports[j].ContainerPort]; ok {
					cs[i].Ports[j].ContainerPort = int32(local)
				}
			}
		}
	}
	pod.Status.Phase = corev1.PodPending
	ready := corev1.ConditionFalse
	if s >= podRunning {
		pod.Status.Phase, pod.Status.PodIP, pod.Status.HostIP = corev1.PodRunning, "127.0.0.1", "127.0.0.1"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	}
	if s == podReady {
		ready = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: ready}}
	a.srv.Put(pod)
}
