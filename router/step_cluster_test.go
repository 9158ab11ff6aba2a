package router

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

func TestClusterStepSendsAProjectToItsOwnCluster(t *testing.T) {
	dir := &fakeDirectory{clusters: map[string]tenancy.Cluster{
		"api": {Name: "api", APIHost: "api.tally.test"},
		"us1": {Name: "us1", APIHost: "us1.api.tally.test"},
	}}
	eu := route{cluster: dir.clusters["api"]}
	cases := []struct {
		name    string
		caller  caller
		byPort  bool
		down    bool
		code    int
		details string
	}{
		{"a project of this cluster", caller{project: tenancy.Project{ID: "p1", Cluster: "api"}, kind: identity.KindApp}, false, false, 0, ""},
		{"a project of another", caller{project: tenancy.Project{ID: "p2", Cluster: "us1"}, kind: identity.KindApp}, false, false,
			http.StatusMisdirectedRequest, "Project p2 lives in cluster us1; send its requests to https://us1.api.tally.test:8443"},
		{"a project of another, by its port", caller{project: tenancy.Project{ID: "p2", Cluster: "us1"}, kind: identity.KindApp}, true, false,
			http.StatusMisdirectedRequest, "send its requests to http://127.0.0.1:8082"},
		{"a download link's project of another", caller{project: tenancy.Project{ID: "p2", Cluster: "us1"}, kind: identity.KindDownload}, false, false,
			http.StatusMisdirectedRequest, "lives in cluster us1"},
		{"the directory unreachable", caller{project: tenancy.Project{ID: "p2", Cluster: "us1"}, kind: identity.KindApp}, false, true,
			http.StatusServiceUnavailable, ""},
		{"a management key has no project", caller{kind: identity.KindManagement}, false, false, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir.err = nil
			if tc.down {
				dir.err = errors.New("down")
			}
			s := clusterStep{clusters: dir, scheme: "https", port: "8443", publicURLs: map[string]string{"us1": "http://127.0.0.1:8082"}}
			req := newReq("GET", "/v1/customers")
			if tc.byPort {
				req = req.WithContext(context.WithValue(req.Context(), fixedHostKey{}, "api.tally.test"))
			}
			res := serveStep(t, s, req, call{route: eu, caller: tc.caller})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if !strings.Contains(res.rec.Body.String(), tc.details) {
				t.Fatalf("answer %s does not say %q", res.rec.Body, tc.details)
			}
		})
	}
}
