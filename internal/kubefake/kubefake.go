// Package kubefake is a Kubernetes API server for tests that serves pods
// the way kube-apiserver serves them to client-go: list, get and watch in a
// namespace or the whole cluster, label selectors, resource versions (a
// watch resumes after any version it served: the whole history is kept),
// bookmarks and WatchList's initial events, over TLS with bearer tokens and
// an authorizer deciding each request as RBAC would. Code that reaches the
// API through a real rest client (an informer, in this process or in
// another one given a kubeconfig) is tested on its real path, which
// client-go's fake clientset skips.
package kubefake

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Attributes are what a request asks, as RBAC sees it.
type Attributes struct {
	User      string // the token's user, e.g. system:serviceaccount:tally:tally-router
	Verb      string // get, list or watch
	Namespace string // "" for the whole cluster
	Resource  string // pods
	Name      string // get's
}

func (a Attributes) String() string {
	s := fmt.Sprintf("%s %s", a.Verb, a.Resource)
	if a.Name != "" {
		s += "/" + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

// Server is a fake API server. Its zero value is not usable: call Start.
type Server struct {
	// URL is where it serves, https://127.0.0.1:port (client-go sends a
	// kubeconfig's credentials over TLS only), with a certificate of its
	// own, CA the PEM of it.
	URL string
	CA  []byte
	// Authorize, when set, decides each authenticated request: a non-nil
	// error is answered 403 Forbidden with its text. Set it before use.
	Authorize func(Attributes) error

	srv     *httptest.Server
	closing chan struct{}

	mu       sync.Mutex
	rv       int64
	pods     map[string]*corev1.Pod // namespace/name
	events   []event                // every change, oldest first
	changed  chan struct{}          // closed and replaced on every change
	tokens   map[string]string      // token → user
	requests []Request
}

// Request is one request served, and why it was refused if it was.
type Request struct {
	Attributes
	Refused string // "" when served
}

// event is one change of a pod: old is nil for a creation, new for a
// deletion.
type event struct {
	rv       int64
	old, new *corev1.Pod
}

// Start serves a fake API server until Close.
func Start() *Server {
	s := &Server{closing: make(chan struct{}), pods: map[string]*corev1.Pod{}, changed: make(chan struct{}), tokens: map[string]string{}, rv: 1000}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	return s
}

// Close ends every watch and stops serving.
func (s *Server) Close() {
	select {
	case <-s.closing:
		return
	default:
	}
	close(s.closing)
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Token is a bearer token the server knows as user.
func (s *Server) Token(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, u := range s.tokens {
		if u == user {
			return t
		}
	}
	t := fmt.Sprintf("kubefake-%d-%s", len(s.tokens)+1, strings.NewReplacer(":", "-", "/", "-").Replace(user))
	s.tokens[t] = user
	return t
}

// ServiceAccountUser is the user a service account's token authenticates as.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// WriteKubeconfig writes a kubeconfig at path reaching this server as user,
// its context's namespace namespace (what a pod's in-cluster config gives:
// the API server, its service account's token and namespace).
func (s *Server) WriteKubeconfig(path, namespace, user string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: fake
  context:
    cluster: fake
    user: %s
    namespace: %s
current-context: fake
`, s.URL, base64.StdEncoding.EncodeToString(s.CA), quote(user), s.Token(user), quote(user), namespace)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// Put creates the pod or replaces it (its resourceVersion is the server's),
// as the kubelet and the scheduler update a pod's status.
func (s *Server) Put(p *corev1.Pod) {
	p = p.DeepCopy()
	p.Kind, p.APIVersion = "Pod", "v1"
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	old := s.pods[key]
	if old == nil {
		p.UID = types.UID("uid-" + strconv.FormatInt(s.rv+1, 10))
		if p.CreationTimestamp.IsZero() {
			p.CreationTimestamp = metav1.NewTime(time.Now())
		}
	} else {
		p.UID, p.CreationTimestamp = old.UID, old.CreationTimestamp
	}
	s.change(old, p)
	s.pods[key] = p
}

// Update changes a stored pod with f (false: no such pod).
func (s *Server) Update(namespace, name string, f func(*corev1.Pod)) bool {
	s.mu.Lock()
	old := s.pods[namespace+"/"+name]
	s.mu.Unlock()
	if old == nil {
		return false
	}
	p := old.DeepCopy()
	f(p)
	s.Put(p)
	return true
}

// Delete removes the pod at once (as after its grace period).
func (s *Server) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	old := s.pods[key]
	if old == nil {
		return
	}
	delete(s.pods, key)
	gone := old.DeepCopy()
	s.change(old, nil)
	gone.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.events[len(s.events)-1].old = gone
}

// change records an event; s.mu is held.
func (s *Server) change(old, new *corev1.Pod) {
	s.rv++
	if new != nil {
		new.ResourceVersion = strconv.FormatInt(s.rv, 10)
	}
	s.events = append(s.events, event{rv: s.rv, old: old, new: new})
	close(s.changed)
	s.changed = make(chan struct{})
}

// Pods are the stored pods.
func (s *Server) Pods() []corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []corev1.Pod
	for _, p := range s.pods {
		out = append(out, *p.DeepCopy())
	}
	return out
}

// Requests are the requests asked so far, served or refused.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) record(a Attributes, refused string) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{a, refused})
	s.mu.Unlock()
}

// serve routes /api/v1/pods, /api/v1/namespaces/{ns}/pods[/{name}].
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "the fake API server only reads")
		return
	}
	a := Attributes{Verb: "list"}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "api" && parts[1] == "v1":
		a.Resource = parts[2]
	case len(parts) >= 5 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "namespaces":
		a.Namespace, a.Resource = parts[3], parts[4]
		if len(parts) == 6 {
			a.Verb, a.Name = "get", parts[5]
		} else if len(parts) > 6 {
			status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
			return
		}
	default:
		status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	q := r.URL.Query()
	if a.Name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1") {
		a.Verb = "watch"
	}
	s.mu.Lock()
	user, ok := s.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	s.mu.Unlock()
	a.User = user
	if !ok {
		s.record(a, "Unauthorized: no token or an unknown one")
		status(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	if s.Authorize != nil {
		if err := s.Authorize(a); err != nil {
			s.record(a, err.Error())
			where := "at the cluster scope"
			if a.Namespace != "" {
				where = fmt.Sprintf("in the namespace %q", a.Namespace)
			}
			status(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group \"\" %s: %v",
				a.Resource, a.User, a.Verb, a.Resource, where, err))
			return
		}
	}
	s.record(a, "")
	if a.Resource != "pods" {
		status(w, http.StatusNotFound, "NotFound", "the fake API server serves pods only")
		return
	}
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", "unable to parse requirement: "+err.Error())
		return
	}
	if fs := q.Get("fieldSelector"); fs != "" {
		status(w, http.StatusBadRequest, "BadRequest", "the fake API server has no field selectors: "+fs)
		return
	}
	switch a.Verb {
	case "get":
		s.mu.Lock()
		p := s.pods[a.Namespace+"/"+a.Name]
		s.mu.Unlock()
		if p == nil {
			status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("pods %q not found", a.Name))
			return
		}
		writeJSON(w, p)
	case "list":
		s.mu.Lock()
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}, Items: []corev1.Pod{}}
		for _, p := range s.pods {
			if matches(p, a.Namespace, sel) {
				list.Items = append(list.Items, *p.DeepCopy())
			}
		}
		s.mu.Unlock()
		writeJSON(w, &list)
	case "watch":
		s.watch(w, r, a.Namespace, sel)
	}
}

func matches(p *corev1.Pod, ns string, sel labels.Selector) bool {
	return p != nil && (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels))
}

// watchEvent is metav1.WatchEvent with its object inline.
type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// watch streams the changes after the request's resourceVersion (or after
// now, or, with sendInitialEvents, every matching pod as ADDED then a
// bookmark marking their end), until the client leaves, timeoutSeconds
// pass or the server closes.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, ns string, sel labels.Selector) {
	q := r.URL.Query()
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	initial := q.Get("sendInitialEvents") == "true"
	var timeout <-chan time.Time
	if n, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && n > 0 {
		timeout = time.After(time.Duration(n) * time.Second)
	}
	s.mu.Lock()
	from := s.rv
	if v := q.Get("resourceVersion"); v != "" && v != "0" && !initial {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.mu.Unlock()
			status(w, http.StatusBadRequest, "BadRequest", "invalid resourceVersion "+v)
			return
		}
		if n > s.rv {
			s.mu.Unlock()
			status(w, http.StatusGatewayTimeout, "Timeout", "Too large resource version: "+v)
			return
		}
		from = n
	}
	var first []watchEvent
	if initial {
		if !bookmarks {
			s.mu.Unlock()
			status(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents needs allowWatchBookmarks")
			return
		}
		for _, p := range s.pods {
			if matches(p, ns, sel) {
				first = append(first, watchEvent{"ADDED", p.DeepCopy()})
			}
		}
		first = append(first, watchEvent{"BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(s.rv, 10),
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	}
	next := len(s.events)
	for next > 0 && s.events[next-1].rv > from {
		next--
	}
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(evs []watchEvent) error {
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	if err := send(first); err != nil {
		return
	}
	for {
		s.mu.Lock()
		var evs []watchEvent
		for ; next < len(s.events); next++ {
			e := s.events[next]
			was, is := matches(e.old, ns, sel), matches(e.new, ns, sel)
			switch {
			case !was && is:
				evs = append(evs, watchEvent{"ADDED", e.new.DeepCopy()})
			case was && is:
				evs = append(evs, watchEvent{"MODIFIED", e.new.DeepCopy()})
			case was && !is && e.new == nil:
				evs = append(evs, watchEvent{"DELETED", e.old.DeepCopy()})
			case was && !is: // its labels no longer match: gone from this watch
				gone := e.new.DeepCopy()
				evs = append(evs, watchEvent{"DELETED", gone})
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if err := send(evs); err != nil {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-timeout:
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: metav1.StatusReason(reason), Code: int32(code)})
}

// ErrDenied is what an Authorize built by RBAC returns for a request no
// rule allows.
var ErrDenied = errors.New("no RBAC rule allows it")
