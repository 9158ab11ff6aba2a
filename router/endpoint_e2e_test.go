package router_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// TestAPathPastEveryRouteIsNoSuchEndpoint walks every registered route of
// the regional and management services with one more path segment: unless
// another route serves that longer path, the answer is 404 "No such
// endpoint", never the route above it taking "id/extra" as its id.
func TestAPathPastEveryRouteIsNoSuchEndpoint(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(), map[string]any{
		"client_trusted_domains": []string{fuzzOrigin}, "client_ip_rate_limit": map[string]any{"requests": 100000, "seconds": 1}}); r.Status != 200 {
		t.Fatalf("client-side settings: %d %s", r.Status, r.Body)
	}
	type route struct {
		method, path string
		mgmt         bool
	}
	var routes []route
	add := func(h http.Handler, mgmt bool) {
		for _, r := range h.(*echo.Echo).Routes() {
			if r.Method == echo.RouteNotFound || strings.HasSuffix(r.Path, "*") || strings.HasPrefix(r.Path, "/internal/") {
				continue
			}
			routes = append(routes, route{r.Method, r.Path, mgmt})
		}
	}
	add(e.Stack.Regional["api"].Handler(), false)
	add(e.Stack.Management.Handler(), true)
	// served says whether some route's pattern matches path.
	served := func(path string) bool {
		segs := strings.Split(path, "/")
		for _, r := range routes {
			rs := strings.Split(r.path, "/")
			if len(rs) != len(segs) {
				continue
			}
			ok := true
			for i := range rs {
				if rs[i] != segs[i] && !strings.HasPrefix(rs[i], ":") {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	walked := 0
	for _, r := range routes {
		path := fillPath(r.path, map[string]string{}) + "/no-such-part"
		if served(path) {
			continue
		}
		walked++
		header := p.Header()
		switch {
		case r.mgmt:
			header = e.MgmtHeader()
		case strings.HasPrefix(r.path, "/client/"):
			header = p.ClientHeader(fuzzOrigin)
		}
		var body any
		if r.method == http.MethodPost || r.method == http.MethodPut {
			body = map[string]any{}
		}
		res := e.Do(t, r.method, stacktest.URL("api", path), header, body)
		var got struct{ Key, Details string }
		if r.method == http.MethodHead && res.Status == http.StatusNotFound {
			continue // no body to read
		}
		if res.Status != http.StatusNotFound || json.Unmarshal(res.Body, &got) != nil || got.Key != "not_found" || got.Details != "No such endpoint." {
			t.Errorf("%s %s (under %s): %d %s", r.method, path, r.path, res.Status, res.Body)
		}
	}
	if walked < 100 {
		t.Fatalf("only %d routes walked", walked)
	}
	t.Logf("%d routes walked", walked)
}
