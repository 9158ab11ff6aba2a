package deploytest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
