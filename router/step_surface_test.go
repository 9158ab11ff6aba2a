package router

import (
	"net/http"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func TestSurfaceStepTellsTheAPI(t *testing.T) {
	cases := []struct {
		name, method, path string
		accept             string
		host               tenancy.HostKind
		noManagement       bool
		code               int
		want               surface
	}{
		{"application API", "GET", "/v1/customers", "", tenancy.APIHost, false, 0, surface{api: apiApp}},
		{"client-side API", "POST", "/client/v1/validations", "", tenancy.APIHost, false, 0, surface{api: apiClient}},
		{"management API", "GET", "/management/v1/projects", "", tenancy.APIHost, false, 0, surface{api: apiManagement}},
		{"management API, none configured", "GET", "/management/v1/projects", "", tenancy.APIHost, true, http.StatusServiceUnavailable, surface{}},
		{"OAuth token", "POST", "/v1/oauth/token", "", tenancy.APIHost, false, 0, surface{api: apiOAuth}},
		{"OAuth takes POST only", "GET", "/v1/oauth/token", "", tenancy.APIHost, false, http.StatusMethodNotAllowed, surface{}},
		{"an export's JSON", "GET", "/v1/exports/exp_1", "application/json", tenancy.APIHost, false, 0, surface{api: apiApp, exportID: "exp_1"}},
		{"an export's file asked as CSV", "GET", "/v1/exports/exp_1", "text/csv", tenancy.APIHost, false, 0, surface{api: apiApp, exportID: "exp_1", file: true}},
		{"an export's file by its link", "GET", "/v1/exports/exp_1?token=t", "", tenancy.APIHost, false, 0, surface{api: apiApp, exportID: "exp_1", file: true}},
		{"an export's file on a download host", "GET", "/v1/exports/exp_1", "", tenancy.DownloadHost, false, 0, surface{api: apiApp, exportID: "exp_1", file: true}},
		{"an export deleted is no file", "DELETE", "/v1/exports/exp_1", "text/csv", tenancy.APIHost, false, 0, surface{api: apiApp}},
		{"anything else on a download host", "GET", "/v1/customers", "", tenancy.DownloadHost, false, http.StatusNotFound, surface{}},
		{"management on a download host", "GET", "/management/v1/projects", "", tenancy.DownloadHost, false, http.StatusNotFound, surface{}},
		{"OAuth on a download host", "POST", "/v1/oauth/token", "", tenancy.DownloadHost, false, http.StatusNotFound, surface{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := serveStep(t, surfaceStep{management: !tc.noManagement}, newReq(tc.method, tc.path, "Accept", tc.accept),
				call{route: route{kind: tc.host}})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if res.next != nil && res.next.surface != tc.want {
				t.Fatalf("surface %+v, want %+v", res.next.surface, tc.want)
			}
		})
	}
}
