package router

import (
	"net/http"
	"testing"

	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/tenancy"
)

func TestVersionStepChoosesTheAPIVersion(t *testing.T) {
	cases := []struct {
		name, pinned, asked string
		api                 api
		code                int
		want                string // on the call and the answer's header
	}{
		{"the latest for a project pinned to none", "", "", apiApp, 0, apiversion.Latest},
		{"the project's pinned version", "v2018-08-01", "", apiApp, 0, "v2018-08-01"},
		{"the header's over the pinned one", "v2018-08-01", "v2017-04-20", apiClient, 0, "v2017-04-20"},
		{"an unknown version", "", "v1999-01-01", apiApp, http.StatusBadRequest, ""},
		{"none on the management API", "", "v1999-01-01", apiManagement, 0, ""},
		{"none on the OAuth endpoints", "", "v1999-01-01", apiOAuth, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := serveStep(t, versionStep{}, newReq("GET", "/v1/customers", apiversion.Header, tc.asked),
				call{surface: surface{api: tc.api}, caller: caller{project: tenancy.Project{APIVersion: tc.pinned}}})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if res.next != nil && res.next.version != tc.want {
				t.Fatalf("version %q, want %q", res.next.version, tc.want)
			}
			if res.next != nil && res.rec.Header().Get(apiversion.Header) != tc.want {
				t.Fatalf("the answer says version %q, want %q", res.rec.Header().Get(apiversion.Header), tc.want)
			}
		})
	}
}
