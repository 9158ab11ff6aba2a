package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/tenancy"
)

// Each step is tested alone (step_*_test.go): served on echo with the
// router's error answers, handed a call as the steps before it would have
// filled it, with a next that records what the step handed on.

// stepResult is one request through one step.
type stepResult struct {
	rec  *httptest.ResponseRecorder
	next *call // what next was handed; nil if the step answered itself
}

// code is the answer's status, 0 if the step handed on (next answers 299).
func (r stepResult) code() int {
	if r.next != nil {
		return 0
	}
	return r.rec.Code
}

// key is the error key of the answer, "" if none.
func (r stepResult) key() string {
	var e struct{ Key string }
	_ = json.Unmarshal(r.rec.Body.Bytes(), &e)
	return e.Key
}

// serveStep sends req through s alone, with x as the earlier steps left it.
func serveStep(t *testing.T, s step, req *http.Request, x call) stepResult {
	t.Helper()
	var res stepResult
	e := httpx.New(httpx.Config{Service: "step-test", Log: slog.New(slog.DiscardHandler)})
	h := chain(func(c echo.Context, got *call) error {
		cp := *got
		res.next = &cp
		return c.NoContent(299)
	}, s)
	e.Any("/*", func(c echo.Context) error { return h(c, &x) })
	res.rec = httptest.NewRecorder()
	e.ServeHTTP(res.rec, req)
	return res
}

func newReq(method, target string, header ...string) *http.Request {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return req
}

// fakeDirectory is the tenancy directory in memory.
type fakeDirectory struct {
	hosts    map[string]route
	clusters map[string]tenancy.Cluster
	keys     map[string]tenancy.AppKey // by "app id:token"
	bearers  map[string]tenancy.Token
	projects map[string]tenancy.Project
	mgmt     map[string]tenancy.ManagementKey // by "id:token"
	origins  tenancy.Origins
	plans    map[string]tenancy.Plan
	err      error // every lookup fails with it, when set
}

// lookup is every lookup of the fake: the directory's error when it is
// down, notFound when m holds no key.
func lookup[V any](d *fakeDirectory, m map[string]V, key string, notFound error) (V, error) {
	if d.err != nil {
		var zero V
		return zero, d.err
	}
	v, ok := m[key]
	if !ok {
		return v, notFound
	}
	return v, nil
}

func (d *fakeDirectory) Host(_ context.Context, host string) (tenancy.Cluster, tenancy.HostKind, error) {
	r, err := lookup(d, d.hosts, host, tenancy.ErrUnknownHost)
	return r.cluster, r.kind, err
}

func (d *fakeDirectory) App(_ context.Context, appID, token string) (tenancy.AppKey, tenancy.Project, error) {
	k, err := lookup(d, d.keys, appID+":"+token, tenancy.ErrBadCredentials)
	if err != nil {
		return k, tenancy.Project{}, err
	}
	return k, d.projects[k.ProjectID], nil
}

func (d *fakeDirectory) Bearer(_ context.Context, token string) (tenancy.AppKey, tenancy.Project, tenancy.Token, error) {
	t, err := lookup(d, d.bearers, token, tenancy.ErrBadCredentials)
	if err != nil {
		return tenancy.AppKey{}, tenancy.Project{}, t, err
	}
	return tenancy.AppKey{AppID: t.AppID, ProjectID: t.ProjectID, Kind: tenancy.KeyApp}, d.projects[t.ProjectID], t, nil
}

func (d *fakeDirectory) Management(_ context.Context, id, token string) (tenancy.ManagementKey, error) {
	return lookup(d, d.mgmt, id+":"+token, tenancy.ErrBadCredentials)
}

func (d *fakeDirectory) Project(_ context.Context, id string) (tenancy.Project, error) {
	return lookup(d, d.projects, id, tenancy.ErrProjectNotFound)
}

func (d *fakeDirectory) ClusterByName(_ context.Context, name string) (tenancy.Cluster, error) {
	if d.err != nil {
		return tenancy.Cluster{}, d.err
	}
	return d.clusters[name], nil
}

func (d *fakeDirectory) ClusterOrigins(context.Context, string) (tenancy.Origins, error) {
	return d.origins, d.err
}

func (d *fakeDirectory) Plan(_ context.Context, name string) (tenancy.Plan, error) {
	return lookup(d, d.plans, name, tenancy.ErrPlanNotFound)
}

// A chain runs its steps in the order given, each once, and stops at the
// first that answers.
func TestChainRunsStepsInOrderAndStopsAtAnAnswer(t *testing.T) {
	var seen []string
	mark := func(name string, answer bool) step {
		return stepFunc(func(c echo.Context, x *call, next handler) error {
			seen = append(seen, name)
			if answer {
				return c.NoContent(http.StatusTeapot)
			}
			return next(c, x)
		})
	}
	cases := []struct {
		name  string
		steps []step
		want  string
		code  int
	}{
		{"all hand on", []step{mark("a", false), mark("b", false), mark("c", false)}, "a b c end", http.StatusNoContent},
		{"the second answers", []step{mark("a", false), mark("b", true), mark("c", false)}, "a b", http.StatusTeapot},
		{"no steps", nil, "end", http.StatusNoContent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			h := chain(func(c echo.Context, x *call) error {
				seen = append(seen, "end")
				return c.NoContent(http.StatusNoContent)
			}, tc.steps...)
			e := echo.New()
			e.Any("/*", func(c echo.Context) error { return h(c, &call{}) })
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, newReq("GET", "/"))
			if got := strings.Join(seen, " "); got != tc.want || rec.Code != tc.code {
				t.Fatalf("ran %q answering %d, want %q answering %d", got, rec.Code, tc.want, tc.code)
			}
		})
	}
}

// stepFunc is a step written as a function, for tests.
type stepFunc func(c echo.Context, x *call, next handler) error

func (f stepFunc) serve(c echo.Context, x *call, next handler) error { return f(c, x, next) }
