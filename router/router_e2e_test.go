package router_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func TestProjectInUS1AnswersOnUS1AndIsMisdirectedElsewhere(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "us1")

	r := e.Do(t, "POST", stacktest.URL("us1", "/v1/customers"), p.Header(), map[string]any{"source_id": "c1", "name": "Ann"})
	if r.Status != 200 {
		t.Fatalf("us1: %d %s", r.Status, r.Body)
	}
	for _, cluster := range []string{"api", "as1"} {
		r := e.Do(t, "GET", stacktest.URL(cluster, "/v1/customers"), p.Header(), nil)
		if r.Status != http.StatusMisdirectedRequest {
			t.Fatalf("%s: status %d, want 421: %s", cluster, r.Status, r.Body)
		}
		m := r.JSON(t)
		if m["key"] != "wrong_cluster" || m["code"] != float64(421) {
			t.Fatalf("%s: body %s", cluster, r.Body)
		}
		details, _ := m["details"].(string)
		if !strings.Contains(details, "http://us1.api.localhost:") {
			t.Fatalf("%s: details do not name us1's base URL: %q", cluster, details)
		}
		if !strings.HasPrefix(m["request_id"].(string), "v-") || r.Header.Get("X-Request-Id") != m["request_id"] {
			t.Fatalf("%s: request id missing or different: %s / %q", cluster, r.Body, r.Header.Get("X-Request-Id"))
		}
	}
}

func TestBadCredentialsAre401WithTheInterfaceBody(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "api")
	cases := map[string]http.Header{
		"wrong token":    {"X-App-Id": {p.AppID}, "X-App-Token": {"not-the-token"}},
		"unknown app id": {"X-App-Id": {"00000000-0000-0000-0000-000000000000"}, "X-App-Token": {p.AppToken}},
		"no credentials": {},
		"only the id":    {"X-App-Id": {p.AppID}},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), h, nil)
			if r.Status != 401 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			m := r.JSON(t)
			if m["code"] != float64(401) || m["key"] != "unauthorized" || m["message"] != "Unauthorized" {
				t.Fatalf("body %s", r.Body)
			}
			if id, _ := m["request_id"].(string); !strings.HasPrefix(id, "v-") {
				t.Fatalf("no request id in %s", r.Body)
			}
		})
	}
}

// (Bare localhost is the api cluster: see TestEveryClusterIsReachableWithoutAHostName.)
func TestUnknownHostIs404(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "api")
	for _, host := range []string{"http://eu9.api.localhost", "http://localhost.localdomain", "http://api.example.com", "http://x.download.localhost"} {
		r := e.Do(t, "GET", host+"/v1/customers", p.Header(), nil)
		if r.Status != 404 {
			t.Fatalf("%s: status %d: %s", host, r.Status, r.Body)
		}
		m := r.JSON(t)
		if m["key"] != "not_found" || m["resource_type"] != "cluster" || m["request_id"] == nil {
			t.Fatalf("%s: body %s", host, r.Body)
		}
	}
}

func TestManagementNeedsManagementCredentials(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "api")
	for name, h := range map[string]http.Header{
		"none":            {},
		"wrong token":     {"X-Management-Id": {e.Mgmt.ID}, "X-Management-Token": {"nope"}},
		"application key": p.Header(),
	} {
		r := e.Do(t, "GET", "http://api.localhost/management/v1/projects", h, nil)
		if r.Status != 401 || r.JSON(t)["key"] != "unauthorized" {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.Do(t, "GET", "http://api.localhost/management/v1/projects", e.MgmtHeader(), nil); r.Status != 200 {
		t.Fatalf("with credentials: %d %s", r.Status, r.Body)
	}
}

func TestRevokedKeyIsRefusedWithinTwoSecondsByTwoRouters(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	second, err := e.Stack.StartRouter()
	if err != nil {
		t.Fatal(err)
	}
	routers := map[string]*http.Client{"first": e.Client, "second": stacktest.ClientFor(second)}
	p := e.CreateProject(t, "as1")
	// Both routers have the key cached.
	for name, c := range routers {
		if r := stacktest.Do(t, c, "GET", stacktest.URL("as1", "/v1/customers"), p.Header(), nil); r.Status != 200 {
			t.Fatalf("%s router before revoke: %d %s", name, r.Status, r.Body)
		}
	}
	r := e.Do(t, "DELETE", "http://api.localhost/management/v1/projects/"+p.ID+"/api-keys/"+p.AppID, e.MgmtHeader(), nil)
	if r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	revoked := time.Now()
	for name, c := range routers {
		for {
			r := stacktest.Do(t, c, "GET", stacktest.URL("as1", "/v1/customers"), p.Header(), nil)
			if r.Status == 401 {
				break
			}
			if r.Status != 200 {
				t.Fatalf("%s router: %d %s", name, r.Status, r.Body)
			}
			if time.Since(revoked) > 2*time.Second {
				t.Fatalf("%s router still accepts the key %v after revocation", name, time.Since(revoked))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("both routers refused the key %v after revocation", time.Since(revoked))
}

func TestClusterWithItsDatabaseDownAnswers503WhileOthersServe(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"us1"}, Clusters: stacktest.AllClusters})
	projects := map[string]stacktest.Project{}
	for _, c := range []string{"api", "us1", "as1"} {
		projects[c] = e.CreateProject(t, c)
		if r := e.Do(t, "GET", stacktest.URL(c, "/v1/customers"), projects[c].Header(), nil); r.Status != 200 {
			t.Fatalf("%s before outage: %d %s", c, r.Status, r.Body)
		}
	}
	e.Servers["us1"].Stop()
	start := time.Now()
	r := e.Do(t, "GET", stacktest.URL("us1", "/v1/customers"), projects["us1"].Header(), nil)
	if r.Status != 503 || r.JSON(t)["key"] != "service_unavailable" {
		t.Fatalf("us1 during outage: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("us1 took %v to answer 503", d)
	}
	// One route of every domain: each says the database is unavailable, not
	// that the server failed.
	for _, path := range []string{"/v1/customers/cust_x", "/v1/products", "/v1/skus/sku_x", "/v1/loyalties",
		"/v1/loyalties/members/lc_x/transactions", "/v1/loyalties/camp_x/earning-rules", "/v1/rewards", "/v1/orders",
		"/v1/redemptions/r_x", "/v1/trash-bin", "/v1/async-actions"} {
		r := e.Do(t, "GET", stacktest.URL("us1", path), projects["us1"].Header(), nil)
		if r.Status != 503 || r.JSON(t)["key"] != "service_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s during outage: %d %v %s", path, r.Status, r.Header, r.Body)
		}
	}
	for _, c := range []string{"api", "as1"} {
		r := e.Do(t, "POST", stacktest.URL(c, "/v1/customers"), projects[c].Header(), map[string]any{"name": "during outage"})
		if r.Status != 200 {
			t.Fatalf("%s during us1 outage: %d %s", c, r.Status, r.Body)
		}
	}
}

func TestUnreachableClusterAnswers503QuicklyAndDedicatedHostsResolve(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	// A dedicated cluster whose regional instances are not running.
	r := e.Do(t, "PUT", "http://api.localhost/management/v1/clusters/acme", e.MgmtHeader(), map[string]any{
		"region": "europe", "kind": "dedicated", "api_host": "acme.api.localhost", "upstream_url": "http://127.0.0.1:1"})
	if r.Status != 200 {
		t.Fatalf("register cluster: %d %s", r.Status, r.Body)
	}
	p := e.CreateProject(t, "acme")
	ok := e.CreateProject(t, "api")
	start := time.Now()
	r = e.Do(t, "GET", "http://acme.api.localhost/v1/customers", p.Header(), nil)
	if r.Status != 503 || r.JSON(t)["key"] != "service_unavailable" {
		t.Fatalf("acme: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("503 took %v", d)
	}
	if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), ok.Header(), nil); r.Status != 200 {
		t.Fatalf("api: %d %s", r.Status, r.Body)
	}
	// The dedicated project's key names its own URL when used on a shared host.
	r = e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil)
	if r.Status != 421 || !strings.Contains(r.JSON(t)["details"].(string), "acme.api.localhost") {
		t.Fatalf("acme key on api: %d %s", r.Status, r.Body)
	}
}

func TestProjectCannotReadAnotherProjectsCustomer(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	a, b := e.CreateProject(t, "api"), e.CreateProject(t, "api")
	r := e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), b.Header(), map[string]any{"source_id": "shared-src", "name": "B's"})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	for _, ref := range []string{id, "shared-src"} {
		r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers/"+ref), a.Header(), nil)
		if r.Status != 404 {
			t.Fatalf("A reading B's %s: %d %s", ref, r.Status, r.Body)
		}
		m := r.JSON(t)
		if m["resource_type"] != "customer" || m["resource_id"] != ref || m["key"] != "not_found" {
			t.Fatalf("404 body: %s", r.Body)
		}
		for _, method := range []string{"PUT", "DELETE"} {
			if r := e.Do(t, method, stacktest.URL("api", "/v1/customers/"+ref), a.Header(), map[string]any{"name": "x"}); r.Status != 404 {
				t.Fatalf("A %s B's customer: %d %s", method, r.Status, r.Body)
			}
		}
	}
	if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), a.Header(), nil); r.JSON(t)["total"] != float64(0) {
		t.Fatalf("A's list shows B's customers: %s", r.Body)
	}
	if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers/"+id), b.Header(), nil); r.Status != 200 {
		t.Fatalf("B reading its own: %d %s", r.Status, r.Body)
	}
}

func TestCredentialHeadersDoNotReachTheRegionalService(t *testing.T) {
	// The regional service itself refuses real application keys without the
	// router's signed identity.
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "api")
	srv := e.Stack.Regional["api"].Handler()
	req, _ := http.NewRequest("GET", "/v1/customers", nil)
	req.Header = p.Header()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), `"key":"unauthorized"`) {
		t.Fatalf("regional without identity: %d %s", rec.Code, rec.Body.String())
	}
}
