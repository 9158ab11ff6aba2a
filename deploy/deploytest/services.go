package deploytest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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
