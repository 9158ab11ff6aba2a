// Package deploytest renders the kustomize overlays under deploy/ with
// kustomize's Go API and boots the platform from what they render: every
// Deployment's and Job's containers run as local processes of the tally
// binary, with exactly their command, arguments and environment, and with
// Kubernetes' service names, listen ports, databases and mounted files
// mapped onto this machine (see Boot for what is replaced, and why).
package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one rendered object: its identity, and its JSON for decoding.
type Object struct {
	APIVersion, Kind, Name, Namespace string
	JSON                              []byte
}

// Map decodes the object loosely, for kinds k8s.io/api has no type for
// (cert-manager's Certificate, CockroachDB's custom resources).
func (o Object) Map() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(o.JSON, &m)
	return m
}

func (o Object) String() string {
	return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name)
}

// Rendered is what one overlay renders.
type Rendered struct {
	Dir     string // the overlay's directory
	Objects []Object

	Deployments []*appsv1.Deployment
	Jobs        []*batchv1.Job
	Services    []*corev1.Service
	Secrets     []*corev1.Secret
	ConfigMaps  []*corev1.ConfigMap
}

// Render runs kustomize on dir, as `kubectl apply -k dir` would, and
// decodes the workloads, services, secrets and config maps it renders.
func Render(dir string) (*Rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	r := &Rendered{Dir: dir}
	for _, res := range m.Resources() {
		b, err := res.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", dir, res.CurId(), err)
		}
		o := Object{APIVersion: res.GetApiVersion(), Kind: res.GetKind(), Name: res.GetName(), Namespace: res.GetNamespace(), JSON: b}
		r.Objects = append(r.Objects, o)
		var dst any
		switch o.APIVersion + "/" + o.Kind {
		case "apps/v1/Deployment":
			dst = added(&r.Deployments)
		case "batch/v1/Job":
			dst = added(&r.Jobs)
		case "v1/Service":
			dst = added(&r.Services)
		case "v1/Secret":
			dst = added(&r.Secrets)
		case "v1/ConfigMap":
			dst = added(&r.ConfigMaps)
		default:
			continue
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", dir, o, err)
		}
	}
	return r, nil
}

// added appends a new object to list and returns it, to decode a rendered
// object of its kind into.
func added[T any](list *[]*T) *T {
	x := new(T)
	*list = append(*list, x)
	return x
}

// appended is added for a list of values.
func appended[T any](list *[]T) *T {
	*list = append(*list, *new(T))
	return &(*list)[len(*list)-1]
}

// Find returns the rendered objects of kind (and apiVersion group prefix,
// when it contains a slash, e.g. "cert-manager.io/Certificate").
func (r *Rendered) Find(kind string) []Object {
	group := ""
	if i := strings.LastIndex(kind, "/"); i >= 0 {
		group, kind = kind[:i], kind[i+1:]
	}
	var out []Object
	for _, o := range r.Objects {
		if o.Kind == kind && strings.HasPrefix(o.APIVersion, group) {
			out = append(out, o)
		}
	}
	return out
}

func (r *Rendered) secret(ns, name string) *corev1.Secret {
	for _, s := range r.Secrets {
		if s.Name == name && s.Namespace == ns {
			return s
		}
	}
	return nil
}

func (r *Rendered) configMap(ns, name string) *corev1.ConfigMap {
	for _, c := range r.ConfigMaps {
		if c.Name == name && c.Namespace == ns {
			return c
		}
	}
	return nil
}

// secretData is a Secret's data, stringData over data, as the API server
// merges them.
func secretData(s *corev1.Secret) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range s.Data {
		out[k] = v
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out
}

func configMapData(c *corev1.ConfigMap) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range c.Data {
		out[k] = []byte(v)
	}
	for k, v := range c.BinaryData {
		out[k] = v
	}
	return out
}

// Overlays lists the leaf overlays under root: every directory holding a
// kustomization that no other kustomization under root uses as a
// resource or component, sorted.
func Overlays(root string) ([]string, error) {
	var dirs []string
	used := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch d.Name() {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			return nil
		}
		dir := filepath.Dir(p)
		dirs = append(dirs, dir)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// resources: and components: entries that are directories.
		for _, line := range strings.Split(string(b), "\n") {
			s := strings.TrimSpace(line)
			if !strings.HasPrefix(s, "- ") {
				continue
			}
			ref := strings.Trim(strings.TrimSpace(strings.TrimPrefix(s, "- ")), `"'`)
			if fi, err := os.Stat(filepath.Join(dir, ref)); err == nil && fi.IsDir() {
				used[filepath.Clean(filepath.Join(dir, ref))] = true
			}
		}
		return nil
	})
	var out []string
	for _, d := range dirs {
		if !used[filepath.Clean(d)] {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out, err
}
