package deploytest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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

// secretIn finds a Secret of w's namespace rendered by any overlay of its
// Kubernetes cluster (the control plane uses what its region's overlay
// renders, say).
func (p *Platform) secretIn(w *Workload, name string) *corev1.Secret {
	return firstIn(p, w, func(r *Rendered) *corev1.Secret { return r.secret(w.Namespace, name) })
}

// configMapIn is secretIn for a ConfigMap.
func (p *Platform) configMapIn(w *Workload, name string) *corev1.ConfigMap {
	return firstIn(p, w, func(r *Rendered) *corev1.ConfigMap { return r.configMap(w.Namespace, name) })
}

// firstIn is the first object find finds in an overlay of w's Kubernetes
// cluster, nil when none has it.
func firstIn[T any](p *Platform, w *Workload, find func(*Rendered) *T) *T {
	for _, r := range p.cfg.Overlays {
		if p.scopeOf(r) == w.scope {
			if x := find(r); x != nil {
				return x
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
