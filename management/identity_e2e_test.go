package management_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/identity"
)

// An identity is good for one cluster and one request: one captured on its
// way to a regional instance (or signed for management, or by the router's
// secret) opens nothing else, and a captured write is not accepted twice.
func TestCapturedIdentitiesAreNotReplayable(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	router, err := identity.NewSigner(stacktest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := identity.NewSigner(e.Stack.Config().OperatorSecret)
	if err != nil {
		t.Fatal(err)
	}
	p := e.CreateProject(t, "api")
	send := func(cluster, method, path, header string) int {
		t.Helper()
		r := stacktest.Do(t, http.DefaultClient, method, e.Stack.RegionalURL(cluster)+path, http.Header{identity.Header: {header}}, nil)
		return r.Status
	}
	parked := "/internal/v1/outbox/parked"
	op := identity.Identity{Audience: identity.AudienceOperator, Cluster: "api", Method: "GET", Path: parked,
		Kind: identity.KindManagement, Expires: time.Now().Add(identity.TTL)}
	if s := send("api", "GET", parked, operator.Sign(op)); s != 200 {
		t.Fatalf("management's own call of api's parked tasks: %d", s)
	}
	// Management's call for api, presented to another cluster.
	for _, cluster := range []string{"us1", "as1"} {
		if s := send(cluster, "GET", parked, operator.Sign(op)); s != 401 {
			t.Errorf("api's operator identity at %s: %d, want 401", cluster, s)
		}
	}
	// ... for another method and path: the requeue of a task.
	if s := send("api", "POST", "/internal/v1/outbox/"+p.ID+"/tsk_1/requeue", operator.Sign(op)); s != 401 {
		t.Errorf("a GET's operator identity on a requeue: %d, want 401", s)
	}
	// What the router signs never opens /internal, whatever it says.
	mgmt := op
	mgmt.Audience = identity.AudienceManagement
	for name, h := range map[string]string{
		"the router's identity for management": router.Sign(mgmt),
		"the router's secret as an operator":   router.Sign(op),
	} {
		if s := send("api", "GET", parked, h); s != 401 {
			t.Errorf("%s at /internal: %d, want 401", name, s)
		}
	}
	// An operator identity seconds old.
	old := op
	old.Expires = time.Now().Add(-time.Second)
	if s := send("api", "GET", parked, operator.Sign(old)); s != 401 {
		t.Errorf("an expired operator identity: %d, want 401", s)
	}

	// An application identity: for its path and method only, a write once.
	app := identity.Identity{Audience: identity.AudienceRegional, ProjectID: p.ID, Cluster: "api", Method: "POST",
		Path: "/v1/customers", Kind: identity.KindApp, KeyID: p.AppID, Expires: time.Now().Add(identity.TTL)}
	h := router.Sign(app)
	create := func(header string) int {
		r := stacktest.Do(t, http.DefaultClient, "POST", e.Stack.RegionalURL("api")+"/v1/customers",
			http.Header{identity.Header: {header}, "Content-Type": {"application/json"}}, map[string]any{"source_id": "replayed"})
		return r.Status
	}
	if s := create(h); s != 200 {
		t.Fatalf("the write it was signed for: %d", s)
	}
	if s := create(h); s != 401 {
		t.Errorf("the same write replayed: %d, want 401", s)
	}
	if s := send("api", "GET", "/v1/customers", router.Sign(app)); s != 401 {
		t.Errorf("a POST's identity on a GET: %d, want 401", s)
	}
	if s := send("api", "GET", parked, router.Sign(app)); s != 401 {
		t.Errorf("an application identity at /internal: %d, want 401", s)
	}
	if s := send("us1", "POST", "/v1/customers", router.Sign(app)); s != 401 {
		t.Errorf("api's identity at us1: %d, want 401", s)
	}
	// A read's identity is good for its query and no other: a captured
	// GET cannot list other customers or more of them.
	list := app
	list.Method, list.Query = "GET", "limit=1"
	if s := send("api", "GET", "/v1/customers?limit=1", router.Sign(list)); s != 200 {
		t.Fatalf("the read it was signed for: %d", s)
	}
	for _, other := range []string{"/v1/customers", "/v1/customers?limit=100", "/v1/customers?limit=1&source_id=replayed"} {
		if s := send("api", "GET", other, router.Sign(list)); s != 401 {
			t.Errorf("GET ?limit=1's identity on GET %s: %d, want 401", other, s)
		}
	}
	opLimited := op
	opLimited.Query = "limit=1"
	if s := send("api", "GET", parked+"?limit=100", operator.Sign(opLimited)); s != 401 {
		t.Errorf("an operator identity for ?limit=1 on ?limit=100: %d, want 401", s)
	}
	// Through the front door everything still works, queries included:
	// the router's and management's own calls.
	if r := e.Do(t, "GET", "http://api.localhost/management/v1/clusters/api/outbox/parked?limit=5", e.MgmtHeader(), nil); r.Status != 200 {
		t.Fatalf("management's parked tasks of api: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers?limit=1&order=-created_at"), p.Header(), nil); r.Status != 200 {
		t.Fatalf("a project's list through the router: %d %s", r.Status, r.Body)
	}
}
