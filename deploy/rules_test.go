package deploy_test

// The rules every rendered overlay keeps: rendered with kustomize's Go API as
// `kubectl apply -k` would, every object of a Kubernetes kind decoded
// strictly into k8s.io/api types (an unknown or misspelt field fails), the
// custom resources (cert-manager, Prometheus operator, CockroachDB operator)
// checked field by field, then the deployment rules of issue 33: pods that
// start (each role's configuration, secrets by reference), a restricted
// securityContext and resources everywhere, pinned images, probes, HPAs that
// own the replica count, a PodDisruptionBudget per workload, Jobs named by
// release, the edge, migrations before serving, and the CockroachDB setup.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// rulesObject is one rendered object, decoded.
type rulesObject struct {
	apiVersion, kind, name, namespace string
	raw                               []byte         // JSON
	typed                             any            // k8s.io/api type, for core kinds
	loose                             map[string]any // every object
}

func (o rulesObject) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// rulesCoreKinds are decoded strictly into their k8s.io/api type.
var rulesCoreKinds = map[string]func() any{
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                             func() any { return &batchv1.Job{} },
	"batch/v1/CronJob":                         func() any { return &batchv1.CronJob{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                                func() any { return &corev1.Secret{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"v1/Namespace":                             func() any { return &corev1.Namespace{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":   func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"rbac.authorization.k8s.io/v1/ClusterRole": func() any { return &rbacv1.ClusterRole{} },
	"networking.k8s.io/v1/Ingress":             func() any { return &networkingv1.Ingress{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any {
		return &rbacv1.ClusterRoleBinding{}
	},
}

// rulesCrdKinds are the custom resources the manifests may use, with the fields
// (dotted paths) each must have; they are checked further below.
var rulesCrdKinds = map[string][]string{
	"cert-manager.io/v1/Certificate":                  {"spec.secretName", "spec.issuerRef.name", "spec.issuerRef.kind"},
	"cert-manager.io/v1/Issuer":                       {"spec"},
	"cert-manager.io/v1/ClusterIssuer":                {"spec"},
	"crdb.cockroachlabs.com/v1alpha1/CrdbCluster":     {"spec.nodes", "spec.tlsEnabled"},
	"monitoring.coreos.com/v1/PrometheusRule":         {"spec.groups"},
	"monitoring.coreos.com/v1/ServiceMonitor":         {"spec.selector", "spec.endpoints"},
	"monitoring.coreos.com/v1/PodMonitor":             {"spec.selector", "spec.podMetricsEndpoints"},
	"external-secrets.io/v1beta1/ExternalSecret":      {"spec.target"},
	"gateway.networking.k8s.io/v1/Gateway":            {"spec.listeners"},
	"gateway.networking.k8s.io/v1/HTTPRoute":          {"spec.rules"},
	"crdb.cockroachlabs.com/v1beta1/CrdbCluster":      {"spec"},
	"crdb.cockroachlabs.com/v1beta1/CrdbNode":         {"spec"},
	"cert-manager.io/v1/CertificateRequest":           {"spec.request"},
	"monitoring.coreos.com/v1alpha1/ScrapeConfig":     {"spec"},
	"monitoring.coreos.com/v1alpha1/AlertmanagerConf": {"spec"},
}

// rulesRendered is one overlay's output.
type rulesRendered struct {
	dir     string // relative to deploy/
	objects []rulesObject
	yaml    string
}

func (r *rulesRendered) all(kind string) []rulesObject {
	var out []rulesObject
	for _, o := range r.objects {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r *rulesRendered) get(kind, name string) (rulesObject, bool) {
	for _, o := range r.objects {
		if o.kind == kind && o.name == name {
			return o, true
		}
	}
	return rulesObject{}, false
}

// overlays are the leaf kustomizations under deploy/: those with a
// kustomization.yaml of kind Kustomization that no other kustomization
// includes as a resource (base/ and cockroachdb/ are parts, components/* are
// Components).
func rulesOverlays(t *testing.T) []string {
	t.Helper()
	type kust struct {
		Kind      string   `json:"kind"`
		Resources []string `json:"resources"`
	}
	all := map[string]kust{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var k kust
		if err := yaml.Unmarshal(b, &k); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		all[filepath.Dir(p)] = k
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	included := map[string]bool{}
	for dir, k := range all {
		for _, r := range k.Resources {
			included[filepath.Clean(filepath.Join(dir, r))] = true
		}
	}
	var out []string
	for dir, k := range all {
		if k.Kind != "Component" && !included[dir] {
			out = append(out, dir)
		}
	}
	sort.Strings(out)
	return out
}

func rulesRender(t *testing.T, dir string) *rulesRendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	r := &rulesRendered{dir: dir, yaml: string(y)}
	for _, res := range m.Resources() {
		b, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, res.CurId(), err)
		}
		o := rulesObject{apiVersion: res.GetApiVersion(), kind: res.GetKind(), name: res.GetName(), namespace: res.GetNamespace(), raw: b}
		if err := json.Unmarshal(b, &o.loose); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		gvk := o.apiVersion + "/" + o.kind
		if mk, ok := rulesCoreKinds[gvk]; ok {
			o.typed = mk()
			strict, err := k8sjson.UnmarshalStrict(b, o.typed, k8sjson.DisallowDuplicateFields, k8sjson.DisallowUnknownFields)
			if err != nil {
				t.Errorf("%s: %s: %v", dir, o, err)
			}
			for _, e := range strict {
				t.Errorf("%s: %s: not a field of %s: %v", dir, o, gvk, e)
			}
		} else if fields, ok := rulesCrdKinds[gvk]; ok {
			for _, f := range fields {
				if _, ok := rulesLookup(o.loose, f); !ok {
					t.Errorf("%s: %s has no %s", dir, o, f)
				}
			}
		} else {
			t.Errorf("%s: %s: kind %s is neither a Kubernetes kind the test decodes nor a known custom resource", dir, o, gvk)
		}
		r.objects = append(r.objects, o)
	}
	return r
}

func rulesLookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func rulesStr(m map[string]any, path string) string {
	v, _ := rulesLookup(m, path)
	s, _ := v.(string)
	return s
}

// rulesWorkload is a pod template of a Deployment, StatefulSet, Job or CronJob.
type rulesWorkload struct {
	obj         rulesObject
	pod         *corev1.PodTemplateSpec
	longRunning bool
}

func rulesWorkloads(r *rulesRendered) []rulesWorkload {
	var out []rulesWorkload
	for _, o := range r.objects {
		switch w := o.typed.(type) {
		case *appsv1.Deployment:
			out = append(out, rulesWorkload{o, &w.Spec.Template, true})
		case *appsv1.StatefulSet:
			out = append(out, rulesWorkload{o, &w.Spec.Template, true})
		case *batchv1.Job:
			out = append(out, rulesWorkload{o, &w.Spec.Template, false})
		case *batchv1.CronJob:
			out = append(out, rulesWorkload{o, &w.Spec.JobTemplate.Spec.Template, false})
		}
	}
	return out
}

const rulesTallyImage = "ghcr.io/tallyhq/tally"

func rulesIsTally(c corev1.Container) bool { return strings.HasPrefix(c.Image, rulesTallyImage+":") }

func rulesEnv(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func rulesRole(c corev1.Container) string {
	if len(c.Args) > 0 {
		return c.Args[0]
	}
	return ""
}

var (
	rulesUrlWithPassword = regexp.MustCompile(`://[^/\s:@]+:[^/\s@]+@`)
	rulesHexSecret       = regexp.MustCompile(`^[0-9a-fA-F]{32,}$`)
	rulesSecretName      = regexp.MustCompile(`(?i)secret|passw|token|credential|private|_key$|^key$`)
	// env vars whose values are credentials or hold them: only from a Secret.
	rulesSecretEnv = regexp.MustCompile(`SECRET|PASSWORD|TOKEN|^TALLY_(DATABASE|TENANCY|REGIONAL)_URL$`)
)

// rulesRequired is what each role needs to start and to serve (cmd/tally): a
// missing one crash-loops the pod or leaves a feature failing.
var rulesRequired = map[string][]string{
	"router":     {"TALLY_ADDR", "TALLY_ADMIN_ADDR", "TALLY_TENANCY_URL", "TALLY_IDENTITY_SECRET", "TALLY_BASE_DOMAIN", "TALLY_MANAGEMENT_URL", "TALLY_TLS_DIR"},
	"regional":   {"TALLY_ADDR", "TALLY_ADMIN_ADDR", "TALLY_CLUSTER", "TALLY_DATABASE_URL", "TALLY_TENANCY_URL", "TALLY_IDENTITY_SECRET", "TALLY_OPERATOR_SECRET"},
	"management": {"TALLY_ADDR", "TALLY_ADMIN_ADDR", "TALLY_TENANCY_URL", "TALLY_IDENTITY_SECRET", "TALLY_OPERATOR_SECRET"},
}

// rulesAdminPorts are the roles' admin listeners (/metrics, /healthz, /readyz).
var rulesAdminPorts = map[string]string{"router": ":9090", "regional": ":9091", "management": ":9092"}

// flagNames are every flag defined in cmd/tally, as TALLY_* names.
func rulesFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("../cmd/tally/*.go")
	re := regexp.MustCompile(`fs\.(?:String|Int|Int64|Bool|Duration|Float64|Var)\((?:&\w+, )?"([a-z0-9-]+)"`)
	out := map[string]bool{"TALLY_LOG_LEVEL": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out["TALLY_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d flags in cmd/tally: has the flag syntax changed?", len(out))
	}
	return out
}

func TestRenderedManifestsKeepTheRules(t *testing.T) {
	dirs := rulesOverlays(t)
	want := []string{"clusters/api", "clusters/as1", "clusters/us1", "control-plane", "dedicated/example"}
	for _, w := range want {
		if !rulesContains(dirs, w) {
			t.Errorf("overlay %s is missing (overlays: %v)", w, dirs)
		}
	}
	flags := rulesFlagNames(t)
	all := map[string]*rulesRendered{}
	for _, d := range dirs {
		all[d] = rulesRender(t, d)
	}
	tenancyMigrators := 0
	for _, d := range dirs {
		r := all[d]
		t.Run(strings.ReplaceAll(d, "/", "_"), func(t *testing.T) {
			if strings.Contains(r.yaml, "set-by-overlay") {
				t.Errorf("a placeholder (set-by-overlay) is left: a name the overlay's config should give")
			}
			rulesCheckWorkloads(t, r, flags)
			rulesCheckConfigMaps(t, r)
			rulesCheckScaling(t, r)
			rulesCheckJobs(t, r)
			rulesCheckEdge(t, r, all)
			rulesCheckCertificates(t, r, all)
			rulesCheckAlerts(t, r)
			rulesCheckRing(t, r)
			rulesCheckCockroach(t, r)
			tenancyMigrators += rulesCheckMigrations(t, r)
		})
	}
	if tenancyMigrators != 1 {
		t.Errorf("%d Deployments migrate the tenancy database; want exactly one (management, in the control plane)", tenancyMigrators)
	}
}

func rulesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func rulesCheckWorkloads(t *testing.T, r *rulesRendered, flags map[string]bool) {
	for _, w := range rulesWorkloads(r) {
		ps := w.pod.Spec
		psc := ps.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", w.obj)
		}
		if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("%s: pod securityContext.runAsUser is not a numeric non-root user (the kubelet cannot check a named one)", w.obj)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccompProfile is not RuntimeDefault", w.obj)
		}
		var cs []corev1.Container
		cs = append(cs, ps.InitContainers...)
		cs = append(cs, ps.Containers...)
		for i, c := range cs {
			init := i < len(ps.InitContainers)
			where := fmt.Sprintf("%s container %s", w.obj, c.Name)
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s: no securityContext", where)
			default:
				if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
					t.Errorf("%s: runAsNonRoot is not true", where)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s: allowPrivilegeEscalation is not false", where)
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s: readOnlyRootFilesystem is not true", where)
				}
				if sc.Capabilities == nil || !rulesContainsCap(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
					t.Errorf("%s: capabilities do not drop ALL (and add none)", where)
				}
				if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: seccompProfile is not RuntimeDefault", where)
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("%s: privileged", where)
				}
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[res]; !ok {
					t.Errorf("%s: no %s request", where, res)
				}
				if _, ok := c.Resources.Limits[res]; !ok {
					t.Errorf("%s: no %s limit", where, res)
				}
			}
			rulesCheckImage(t, where, c.Image)
			if w.longRunning && !init {
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					t.Errorf("%s: a long-running container needs a readiness and a liveness probe", where)
				} else if rulesIsTally(c) {
					rulesCheckProbe(t, where, "readiness", c.ReadinessProbe, "/readyz")
					rulesCheckProbe(t, where, "liveness", c.LivenessProbe, "/healthz")
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					t.Errorf("%s: envFrom a Secret: secrets are read one key at a time, by secretKeyRef", where)
				}
			}
			for _, e := range c.Env {
				if e.Value != "" && (rulesUrlWithPassword.MatchString(e.Value) || rulesHexSecret.MatchString(e.Value)) {
					t.Errorf("%s: env %s holds what looks like a credential; read it from a Secret (secretKeyRef)", where, e.Name)
				}
				if rulesSecretEnv.MatchString(e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s: env %s is a credential but not read by secretKeyRef", where, e.Name)
				}
				if rulesIsTally(c) && strings.HasPrefix(e.Name, "TALLY_") && !flags[e.Name] {
					t.Errorf("%s: env %s is no flag of cmd/tally (TALLY_ + the flag upper-cased): it would be ignored", where, e.Name)
				}
			}
			if !rulesIsTally(c) || init {
				continue
			}
			rl := rulesRole(c)
			for _, name := range rulesRequired[rl] {
				if _, ok := rulesEnv(c, name); !ok {
					t.Errorf("%s: tally %s needs %s", where, rl, name)
				}
			}
			if a, ok := rulesEnv(c, "TALLY_ADMIN_ADDR"); ok && rulesAdminPorts[rl] != "" && a.Value != rulesAdminPorts[rl] {
				t.Errorf("%s: TALLY_ADMIN_ADDR %q, want %q (the probes' admin port)", where, a.Value, rulesAdminPorts[rl])
			}
			if rl == "router" {
				if p, ok := rulesEnv(c, "TALLY_TRUSTED_PROXIES"); ok && p.Value != "" {
					t.Errorf("%s: TALLY_TRUSTED_PROXIES=%q: clients reach the router directly (externalTrafficPolicy: Local), so no address is a proxy; a trusted range lets its clients share one per-address limit", where, p.Value)
				}
			}
			rulesCheckDBCerts(t, where, c)
		}
	}
}

func rulesContainsCap(l []corev1.Capability, c corev1.Capability) bool {
	for _, x := range l {
		if x == c {
			return true
		}
	}
	return false
}

func rulesCheckImage(t *testing.T, where, image string) {
	if strings.Contains(image, "@sha256:") {
		return
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	switch {
	case i < 0:
		t.Errorf("%s: image %s has no tag", where, image)
	case name[i+1:] == "latest" || name[i+1:] == "":
		t.Errorf("%s: image %s is not pinned to a release", where, image)
	}
}

func rulesCheckProbe(t *testing.T, where, kind string, p *corev1.Probe, path string) {
	if p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "admin" {
		t.Errorf("%s: %s probe must be GET %s on the admin port", where, kind, path)
	}
}

// checkDBCerts: a Tally container given a database URL mounts the client
// certificate its URL names (/etc/tally/db/regional or /etc/tally/db/tenancy).
func rulesCheckDBCerts(t *testing.T, where string, c corev1.Container) {
	for envName, dir := range map[string]string{"TALLY_DATABASE_URL": "/etc/tally/db/regional", "TALLY_REGIONAL_URL": "/etc/tally/db/regional", "TALLY_TENANCY_URL": "/etc/tally/db/tenancy"} {
		if _, ok := rulesEnv(c, envName); !ok {
			continue
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("%s: reads %s but mounts no client certificate at %s (sslmode=verify-full)", where, envName, dir)
		}
	}
}

func rulesCheckConfigMaps(t *testing.T, r *rulesRendered) {
	for _, o := range r.all("ConfigMap") {
		cm := o.typed.(*corev1.ConfigMap)
		for k, v := range cm.Data {
			if rulesSecretName.MatchString(k) {
				t.Errorf("%s: key %s names a secret; secrets go in Secrets, read by secretKeyRef", o, k)
			}
			for _, line := range strings.Split(v, "\n") {
				if rulesUrlWithPassword.MatchString(line) || rulesHexSecret.MatchString(strings.TrimSpace(line)) {
					t.Errorf("%s: key %s holds what looks like a credential", o, k)
				}
			}
		}
	}
}

func rulesCheckScaling(t *testing.T, r *rulesRendered) {
	hpaTargets := map[string]bool{}
	for _, o := range r.all("HorizontalPodAutoscaler") {
		h := o.typed.(*autoscalingv2.HorizontalPodAutoscaler)
		ref := h.Spec.ScaleTargetRef
		hpaTargets[ref.Kind+"/"+ref.Name] = true
		if _, ok := r.get(ref.Kind, ref.Name); !ok {
			t.Errorf("%s scales %s/%s, which is not rendered", o, ref.Kind, ref.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			t.Errorf("%s: minReplicas under 2 leaves no pod during a disruption", o)
		}
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, o := range r.all("PodDisruptionBudget") {
		pdbs = append(pdbs, o.typed.(*policyv1.PodDisruptionBudget))
	}
	for _, w := range rulesWorkloads(r) {
		if !w.longRunning {
			continue
		}
		if d, ok := w.obj.typed.(*appsv1.Deployment); ok && hpaTargets["Deployment/"+d.Name] && d.Spec.Replicas != nil {
			t.Errorf("%s: spec.replicas is set while an HPA owns the count: every apply resets the scale", w.obj)
		}
		covered := false
		for _, p := range pdbs {
			sel, err := rulesMetaSelector(p)
			if err == nil && sel.Matches(labels.Set(w.pod.Labels)) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", w.obj)
		}
	}
}

func rulesMetaSelector(p *policyv1.PodDisruptionBudget) (labels.Selector, error) {
	if p.Spec.Selector == nil {
		return labels.Nothing(), nil
	}
	s := labels.Set(p.Spec.Selector.MatchLabels)
	if len(p.Spec.Selector.MatchExpressions) > 0 {
		return nil, fmt.Errorf("matchExpressions not supported here")
	}
	return labels.SelectorFromSet(s), nil
}

// release is the tag of the overlay's Tally image (one for every container).
func rulesRelease(t *testing.T, r *rulesRendered) string {
	tags := map[string]bool{}
	for _, w := range rulesWorkloads(r) {
		for _, c := range append(append([]corev1.Container{}, w.pod.Spec.InitContainers...), w.pod.Spec.Containers...) {
			if rulesIsTally(c) {
				tags[c.Image[len(rulesTallyImage)+1:]] = true
			}
		}
	}
	if len(tags) > 1 {
		t.Errorf("Tally images of several releases: %v", tags)
	}
	for tag := range tags {
		return tag
	}
	return ""
}

func rulesCheckJobs(t *testing.T, r *rulesRendered) {
	rel := rulesRelease(t, r)
	for _, o := range r.all("Job") {
		suffix := "-" + strings.NewReplacer(".", "-", "+", "-").Replace(rel)
		if rel == "" || !strings.HasSuffix(o.name, suffix) {
			t.Errorf("%s: a Job's name must carry the release (…%s): a Job's template cannot change, so a fixed name fails the next release's apply", o, suffix)
		}
		j := o.typed.(*batchv1.Job)
		if j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyAlways {
			t.Errorf("%s: restartPolicy Always", o)
		}
	}
}

// checkEdge: the router's public Service keeps the client's address, TLS is
// served for every public host, and management is reachable by the name the
// routers use.
func rulesCheckEdge(t *testing.T, r *rulesRendered, all map[string]*rulesRendered) {
	d, ok := r.get("Deployment", "tally-router")
	if !ok {
		return
	}
	pod := d.typed.(*appsv1.Deployment).Spec.Template
	lb := 0
	for _, o := range r.all("Service") {
		s := o.typed.(*corev1.Service)
		if s.Spec.Selector["app"] != "tally-router" {
			continue
		}
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			lb++
			if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
				t.Errorf("%s: externalTrafficPolicy is not Local: the router would see nodes' addresses, not clients'", o)
			}
			has443 := false
			for _, p := range s.Spec.Ports {
				has443 = has443 || p.Port == 443
			}
			if !has443 {
				t.Errorf("%s: no port 443", o)
			}
		}
	}
	if lb != 1 {
		t.Errorf("%d LoadBalancer Services reach the router; want one", lb)
	}
	c := pod.Spec.Containers[0]
	tlsDir, _ := rulesEnv(c, "TALLY_TLS_DIR")
	for _, o := range r.all("Certificate") {
		if rulesStr(o.loose, "spec.issuerRef.kind") != "ClusterIssuer" {
			continue // the databases' certificates
		}
		secret := rulesStr(o.loose, "spec.secretName")
		want := strings.TrimSuffix(tlsDir.Value, "/") + "/" + secret
		if !rulesMountsSecret(pod.Spec, c, secret, want) {
			t.Errorf("%s: the router does not mount its Secret %s at %s", o, secret, want)
		}
	}
	mu, _ := rulesEnv(c, "TALLY_MANAGEMENT_URL")
	host := mu.Value
	host = strings.TrimPrefix(strings.TrimPrefix(host, "http://"), "https://")
	host = strings.SplitN(strings.SplitN(host, "/", 2)[0], ":", 2)[0]
	name := strings.SplitN(host, ".", 2)[0]
	if _, ok := r.get("Service", name); ok {
		return
	}
	// Where the control plane shares the Kubernetes cluster and namespace.
	if cp, ok := all[rulesColocated[r.dir]]; ok {
		if s, ok := cp.get("Service", name); ok && s.namespace == d.namespace {
			return
		}
	}
	t.Errorf("the router's TALLY_MANAGEMENT_URL %q names no Service of its cluster", mu.Value)
}

// rulesColocated: the overlays whose Kubernetes cluster and namespace also run
// the control plane (deploy/README.md).
var rulesColocated = map[string]string{"clusters/api": "control-plane"}

func rulesMountsSecret(ps corev1.PodSpec, c corev1.Container, secret, path string) bool {
	for _, v := range ps.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.MountPath == path {
				return true
			}
		}
	}
	return false
}

// checkCertificates: every Certificate names an issuer that exists and has
// host names the overlay filled in; every Secret a pod mounts that is not a
// Certificate's or a ConfigMap is one the README lists.
func rulesCheckCertificates(t *testing.T, r *rulesRendered, all map[string]*rulesRendered) {
	issuers := map[string]bool{}
	for _, d := range all {
		for _, o := range d.all("ClusterIssuer") {
			issuers["ClusterIssuer/"+o.name] = true
		}
	}
	for _, o := range r.all("Issuer") {
		issuers["Issuer/"+o.name] = true
	}
	certSecrets := map[string]bool{}
	for _, o := range r.all("Certificate") {
		ref := rulesStr(o.loose, "spec.issuerRef.kind") + "/" + rulesStr(o.loose, "spec.issuerRef.name")
		if !issuers[ref] {
			t.Errorf("%s: its issuer %s is rendered nowhere", o, ref)
		}
		certSecrets[rulesStr(o.loose, "spec.secretName")] = true
		names, _ := rulesLookup(o.loose, "spec.dnsNames")
		l, _ := names.([]any)
		if len(l) == 0 && rulesStr(o.loose, "spec.commonName") == "" {
			t.Errorf("%s: no dnsNames or commonName", o)
		}
	}
}

var rulesMetricName = regexp.MustCompile(`\b(tally_[a-z0-9_]+)`)

// checkAlerts: every metric an alert reads is one the code exports.
func rulesCheckAlerts(t *testing.T, r *rulesRendered) {
	var src strings.Builder
	for _, o := range r.all("PrometheusRule") {
		if src.Len() == 0 {
			_ = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
				if err != nil {
					return nil
				}
				if d.IsDir() && (d.Name() == ".git" || d.Name() == "deploy" || d.Name() == "bench") {
					return filepath.SkipDir
				}
				if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
					b, _ := os.ReadFile(p)
					src.Write(b)
				}
				return nil
			})
		}
		groups, _ := rulesLookup(o.loose, "spec.groups")
		gl, _ := groups.([]any)
		for _, g := range gl {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, rule := range rules {
				rm, _ := rule.(map[string]any)
				expr, _ := rm["expr"].(string)
				for _, m := range rulesMetricName.FindAllString(expr, -1) {
					base := m
					for _, s := range []string{"_bucket", "_count", "_sum"} {
						base = strings.TrimSuffix(base, s)
					}
					if !strings.Contains(src.String(), `"`+base+`"`) {
						t.Errorf("%s: alert %v reads %s, which no Go code exports", o, rm["alert"], m)
					}
				}
			}
		}
	}
	need := []string{"tally_http_requests_total", "tally_http_request_duration_seconds_bucket", "tally_outbox_lag_seconds", "webhook.deliver", "tally_ratelimit_fail_open_total",
		"tally_ratelimit_peer_fail_open_total", "tally_project_over_share_total"}
	if len(r.all("Deployment")) > 0 && strings.Contains(r.yaml, "tally-regional") {
		for _, n := range need {
			if !strings.Contains(r.yaml, n) {
				t.Errorf("no alert reads %s", n)
			}
		}
		if len(r.all("PodMonitor"))+len(r.all("ServiceMonitor")) == 0 {
			t.Errorf("nothing scrapes the pods' metrics (PodMonitor or ServiceMonitor)")
		}
	}
}

// checkRing: the router pods keep the per-address limits as their region's
// ring (issue 35): a peer listener on every address at the container port
// named peer (where discovery reaches each pod), advertised at the pod's IP,
// and the router pods found in the Kubernetes API by a selector of their own
// labels and of no other pods'. The API is reached with a service account of
// the router's own, whose token only the router pods mount, and which may
// list and watch pods in its namespace, nothing else: no ClusterRole or
// ClusterRoleBinding, no other verb, resource, group or wildcard. No other
// Tally pod mounts a service account token. A NetworkPolicy that selects the
// router pods lets their peer port in from the router pods.
func rulesCheckRing(t *testing.T, r *rulesRendered) {
	d, ok := r.get("Deployment", "tally-router")
	if !ok {
		return
	}
	pod := d.typed.(*appsv1.Deployment).Spec.Template
	c := pod.Spec.Containers[0]
	where := fmt.Sprintf("%s container %s", d, c.Name)
	for _, other := range []string{"TALLY_PEERS", "TALLY_PEERS_DNS"} {
		if _, ok := rulesEnv(c, other); ok {
			t.Errorf("%s: %s is set: the manifests find the ring in the Kubernetes API (TALLY_PEERS_K8S)", where, other)
		}
	}
	addr, _ := rulesEnv(c, "TALLY_PEER_ADDR")
	host, port, err := net.SplitHostPort(addr.Value)
	if err != nil || host != "" {
		t.Errorf("%s: TALLY_PEER_ADDR %q: the ring needs a peer listener on every address of the pod, such as \":7070\"", where, addr.Value)
	}
	declared := false
	for _, cp := range c.Ports {
		if cp.Name == rulesPeerPort {
			declared = strconv.Itoa(int(cp.ContainerPort)) == port
		}
	}
	if !declared {
		t.Errorf("%s: no container port named %s at TALLY_PEER_ADDR's port %s: discovery reaches each pod at that port", where, rulesPeerPort, port)
	}
	podIP := -1
	for i, e := range c.Env {
		if e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			podIP = i
		}
		if e.Name == "TALLY_PEER_ADVERTISE" && (e.Value != "$(POD_IP):"+port || podIP < 0) {
			t.Errorf("%s: TALLY_PEER_ADVERTISE %q: want \"$(POD_IP):%s\" after POD_IP from status.podIP, the address the others have for this pod", where, e.Value, port)
		}
	}
	if podIP < 0 {
		t.Errorf("%s: no POD_IP from the downward API's status.podIP (the ring's address of this pod)", where)
	}
	sel, _ := rulesEnv(c, "TALLY_PEERS_K8S")
	ls, err := labels.Parse(sel.Value)
	switch {
	case sel.Value == "" || err != nil:
		t.Errorf("%s: TALLY_PEERS_K8S %q is no label selector of the router pods: the router keeps its limits alone", where, sel.Value)
	case !ls.Matches(labels.Set(pod.Labels)):
		t.Errorf("%s: TALLY_PEERS_K8S %q does not select the router's own pods (labels %v)", where, sel.Value, pod.Labels)
	}
	// The service account and what it may do.
	sa := pod.Spec.ServiceAccountName
	saObj, found := r.get("ServiceAccount", sa)
	if sa == "" || sa == "default" || !found {
		t.Errorf("%s: serviceAccountName %q: the router needs a service account of its own, rendered, for its Role", d, sa)
	} else if !rulesAutomounts(pod.Spec, saObj) {
		t.Errorf("%s: the pod does not mount its service account's token (automountServiceAccountToken): discovery cannot reach the API", d)
	}
	for _, w := range rulesWorkloads(r) {
		if w.obj.name == d.name || !rulesRunsTally(w.pod.Spec) {
			continue
		}
		if sa, _ := r.get("ServiceAccount", w.pod.Spec.ServiceAccountName); rulesAutomounts(w.pod.Spec, sa) {
			t.Errorf("%s: mounts a service account token (automountServiceAccountToken) it has no use for", w.obj)
		}
		if ls != nil && ls.Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: TALLY_PEERS_K8S %q selects its pods too: they would join the routers' ring", w.obj, sel.Value)
		}
	}
	bound := func(subjects []rbacv1.Subject, ns string) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && (s.Namespace == ns || s.Namespace == "" && ns == d.namespace) {
				return true
			}
		}
		return false
	}
	for _, o := range r.all("ClusterRoleBinding") {
		if bound(o.typed.(*rbacv1.ClusterRoleBinding).Subjects, d.namespace) {
			t.Errorf("%s binds the router's service account: its rights are namespaced (a Role and RoleBinding)", o)
		}
	}
	var rules []rbacv1.PolicyRule
	for _, o := range r.all("RoleBinding") {
		b := o.typed.(*rbacv1.RoleBinding)
		if !bound(b.Subjects, o.namespace) {
			continue
		}
		if o.namespace != d.namespace {
			t.Errorf("%s binds the router's service account in another namespace", o)
		}
		role, ok := r.get(b.RoleRef.Kind, b.RoleRef.Name)
		if b.RoleRef.Kind != "Role" || !ok || role.namespace != o.namespace {
			t.Errorf("%s: binds %s %s, not a Role of its namespace", o, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		rules = append(rules, role.typed.(*rbacv1.Role).Rules...)
	}
	granted := map[string]bool{}
	for _, rule := range rules {
		if !slices.Equal(rule.APIGroups, []string{""}) || !slices.Equal(rule.Resources, []string{"pods"}) ||
			len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			t.Errorf("the router's Role grants %v on %v of groups %v: it needs pods of the core group only", rule.Verbs, rule.Resources, rule.APIGroups)
		}
		for _, v := range rule.Verbs {
			if v != "list" && v != "watch" {
				t.Errorf("the router's Role grants %q on %v: peer discovery only lists and watches", v, rule.Resources)
			}
			granted[v] = true
		}
	}
	if !granted["list"] || !granted["watch"] {
		t.Errorf("the router's service account %q may not list and watch pods in %s: discovery fails and the router is never ready", sa, d.namespace)
	}
	for _, o := range r.all("NetworkPolicy") {
		np := o.typed.(*networkingv1.NetworkPolicy)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		if !rulesLetsPeersIn(np, pod.Labels, port) {
			t.Errorf("%s: selects the router pods but lets no router pod in on the peer port %s", o, port)
		}
	}
}

// rulesPeerPort is the name of the container port where discovery reaches a
// router pod's peer listener (internal/peerlimit.PeerPortName).
const rulesPeerPort = "peer"

// rulesAutomounts is whether a pod mounts its service account's token:
// the pod's setting, else the service account's, else yes.
func rulesAutomounts(ps corev1.PodSpec, sa rulesObject) bool {
	if ps.AutomountServiceAccountToken != nil {
		return *ps.AutomountServiceAccountToken
	}
	if s, ok := sa.typed.(*corev1.ServiceAccount); ok && s.AutomountServiceAccountToken != nil {
		return *s.AutomountServiceAccountToken
	}
	return true
}

func rulesRunsTally(ps corev1.PodSpec) bool {
	for _, c := range append(append([]corev1.Container{}, ps.InitContainers...), ps.Containers...) {
		if rulesIsTally(c) {
			return true
		}
	}
	return false
}

// rulesLetsPeersIn: an ingress rule of np admits pods with labels on port.
func rulesLetsPeersIn(np *networkingv1.NetworkPolicy, podLabels map[string]string, port string) bool {
	for _, in := range np.Spec.Ingress {
		portOK := len(in.Ports) == 0
		for _, p := range in.Ports {
			portOK = portOK || p.Port == nil || p.Port.String() == port || p.Port.String() == rulesPeerPort
		}
		fromOK := len(in.From) == 0
		for _, f := range in.From {
			if f.PodSelector != nil && f.NamespaceSelector == nil {
				if s, err := metav1.LabelSelectorAsSelector(f.PodSelector); err == nil && s.Matches(labels.Set(podLabels)) {
					fromOK = true
				}
			}
		}
		if portOK && fromOK {
			return true
		}
	}
	return false
}

// checkCockroach: an overlay that runs CockroachDB nodes runs them with TLS,
// sets its database up and schedules its backups to object storage.
func rulesCheckCockroach(t *testing.T, r *rulesRendered) {
	sts, ok := r.get("StatefulSet", "cockroachdb")
	if !ok {
		return
	}
	c := sts.typed.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if a == "--insecure" {
			t.Errorf("%s runs --insecure", sts)
		}
	}
	sql := ""
	for _, o := range r.all("ConfigMap") {
		for _, v := range o.typed.(*corev1.ConfigMap).Data {
			sql += v + "\n"
		}
	}
	for _, s := range []string{"CREATE SCHEDULE", "FOR BACKUP", "RECURRING", "@BACKUP_URI@", "PLACEMENT RESTRICTED"} {
		if !strings.Contains(sql, s) {
			t.Errorf("the region's setup SQL has no %q", s)
		}
	}
	if !regexp.MustCompile(`BACKUP_URI: s3://`).MatchString(r.yaml) {
		t.Errorf("no BACKUP_URI in s3:// (object storage) in the overlay's config")
	}
}

// checkMigrations: regional pods migrate their database in an init
// container before they serve; management migrates the tenancy database.
// It returns how many Deployments migrate the tenancy database.
func rulesCheckMigrations(t *testing.T, r *rulesRendered) int {
	tenancy := 0
	for _, o := range r.all("Deployment") {
		d := o.typed.(*appsv1.Deployment)
		ps := d.Spec.Template.Spec
		if len(ps.Containers) == 0 || !rulesIsTally(ps.Containers[0]) {
			continue
		}
		var migrates []corev1.Container
		for _, c := range ps.InitContainers {
			if rulesIsTally(c) && rulesRole(c) == "migrate" {
				migrates = append(migrates, c)
			}
		}
		for _, c := range migrates {
			if _, ok := rulesEnv(c, "TALLY_TENANCY_URL"); ok {
				tenancy++
			}
		}
		switch rulesRole(ps.Containers[0]) {
		case "regional":
			db, _ := rulesEnv(ps.Containers[0], "TALLY_DATABASE_URL")
			ok := false
			for _, c := range migrates {
				if u, found := rulesEnv(c, "TALLY_REGIONAL_URL"); found && db.ValueFrom != nil && u.ValueFrom != nil &&
					db.ValueFrom.SecretKeyRef != nil && u.ValueFrom.SecretKeyRef != nil && *db.ValueFrom.SecretKeyRef == *u.ValueFrom.SecretKeyRef {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: no init container runs `tally migrate` on its database (TALLY_REGIONAL_URL from the Secret of TALLY_DATABASE_URL)", o)
			}
		case "management":
			if tenancy == 0 {
				t.Errorf("%s: no init container runs `tally migrate` on the tenancy database", o)
			}
		}
	}
	return tenancy
}

// TestTenancyGlobalPlacesEveryTable: the multi-region setup gives every
// table of the tenancy migrations a locality, survives a region's loss and
// takes its region names from the control plane's config, not the SQL.
func TestTenancyGlobalPlacesEveryTable(t *testing.T) {
	b, err := os.ReadFile("cockroachdb/tenancy-global.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := string(b)
	files, _ := filepath.Glob("../tenancy/migrations/*.up.sql")
	create := regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)`)
	tables := map[string]bool{}
	for _, f := range files {
		m, _ := os.ReadFile(f)
		for _, x := range create.FindAllStringSubmatch(string(m), -1) {
			tables[x[1]] = true
		}
	}
	if len(tables) < 6 {
		t.Fatalf("found %d tenancy tables; the glob or the pattern is wrong", len(tables))
	}
	for tbl := range tables {
		if !regexp.MustCompile(`ALTER TABLE ` + tbl + ` SET LOCALITY (GLOBAL|REGIONAL BY ROW|REGIONAL BY TABLE)`).MatchString(sql) {
			t.Errorf("tenancy-global.sql gives table %s no locality", tbl)
		}
	}
	for _, s := range []string{"SURVIVE REGION FAILURE", "@PRIMARY_REGION@", "@ADD_REGIONS@", "CREATE SCHEDULE", "RECURRING"} {
		if !strings.Contains(sql, s) {
			t.Errorf("tenancy-global.sql has no %q", s)
		}
	}
	if m := regexp.MustCompile(`"[a-z]+-[a-z]+-?[0-9]"`).FindString(sql); m != "" {
		t.Errorf("tenancy-global.sql names a region (%s): regions come from the control plane's tally-control-config", m)
	}
}
