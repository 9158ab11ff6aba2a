package stacktest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// API is one project's client of its cluster, for tests that make many
// calls as that project.
type API struct {
	T testing.TB
	E *Env
	P Project
}

// NewAPI starts a platform and makes a project in cluster "api".
func NewAPI(t testing.TB) API {
	e := Start(t, Options{})
	return API{T: t, E: e, P: e.CreateProject(t, "api")}
}

// Do sends a request to path on the project's cluster with its keys.
func (a API) Do(method, path string, body any) Resp {
	a.T.Helper()
	return a.E.Do(a.T, method, URL(a.P.Cluster, path), a.P.Header(), body)
}

// OK is Do for a call that must answer 200; it returns the body.
func (a API) OK(method, path string, body any) map[string]any {
	a.T.Helper()
	r := a.Do(method, path, body)
	if r.Status != 200 {
		a.T.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	return r.JSON(a.T)
}

// Fails is Do for a call that must fail with status and, when key is not
// empty, that error key; it returns the error body.
func (a API) Fails(method, path string, body any, status int, key string) map[string]any {
	a.T.Helper()
	r := a.Do(method, path, body)
	m := r.JSON(a.T)
	if r.Status != status || (key != "" && m["key"] != key) {
		a.T.Fatalf("%s %s: %d %s, want %d %s", method, path, r.Status, r.Body, status, key)
	}
	return m
}

// WaitAction polls an async action until it is DONE and returns it; FAILED,
// or not DONE within 30 s, fails the test.
func (a API) WaitAction(id string) map[string]any {
	a.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		act := a.OK("GET", "/v1/async-actions/"+id, nil)
		if act["status"] == "DONE" {
			return act
		}
		if act["status"] == "FAILED" || time.Now().After(deadline) {
			a.T.Fatalf("async action: %v", act)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Hooks is a webhook receiver: the events it got, in arrival order.
type Hooks struct {
	mu    sync.Mutex
	types []string
	datas []map[string]any
}

// Subscribe points a webhook of the project for events at a new receiver.
func (a API) Subscribe(events ...string) *Hooks {
	a.T.Helper()
	h := &Hooks{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Object map[string]any `json:"object"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &ev)
		h.mu.Lock()
		h.types = append(h.types, ev.Type)
		h.datas = append(h.datas, ev.Data.Object)
		h.mu.Unlock()
	}))
	a.T.Cleanup(srv.Close)
	r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/webhooks", a.E.MgmtHeader(),
		map[string]any{"target_url": srv.URL + "/hooks", "events": events})
	if r.Status != 200 {
		a.T.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	return h
}

// Count is how many events of type typ arrived.
func (h *Hooks) Count(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, x := range h.types {
		if x == typ {
			n++
		}
	}
	return n
}

// All are the objects of the events of type typ that arrived, in the
// order they arrived (deliveries are concurrent: not always the order
// they were raised).
func (h *Hooks) All(typ string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for i, x := range h.types {
		if x == typ {
			out = append(out, h.datas[i])
		}
	}
	return out
}

// Wait waits for n events of type typ and returns the last one's object.
func (h *Hooks) Wait(t testing.TB, typ string, n int) map[string]any {
	t.Helper()
	Eventually(t, 10*time.Second, typ+" events", func() bool { return h.Count(typ) >= n })
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.types) - 1; i >= 0; i-- {
		if h.types[i] == typ {
			return h.datas[i]
		}
	}
	return nil
}
