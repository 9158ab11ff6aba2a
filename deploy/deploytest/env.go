package deploytest

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
