package router

import (
	"errors"
	"net/http"
	"testing"

	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

func TestLimitStepAppliesEachAPIsLimits(t *testing.T) {
	small := tenancy.Plan{Name: "small", RequestsPerMinute: 3, RequestsPerHour: 100}
	cases := []struct {
		name     string
		api      api
		plan     string
		down     bool
		requests int
		accepted int
		header   string // a limit header every answer carries
	}{
		{"the plan's per minute on the application API", apiApp, "small", false, 5, 3, "X-Rate-Limit-Limit"},
		{"the plan's on the OAuth endpoints too", apiOAuth, "small", false, 5, 3, "X-Rate-Limit-Limit"},
		{"the per-address limit on the client-side API", apiClient, "small", false, 8, 5, "X-Rate-Limit-Limit"},
		{"no plan, no plan limits", apiApp, "gone", false, 8, 8, ""},
		{"none on the management API", apiManagement, "", false, 8, 8, ""},
		{"the directory unreachable", apiApp, "small", true, 3, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := &fakeDirectory{plans: map[string]tenancy.Plan{"small": small}}
			if tc.down {
				dir.err = errors.New("down")
			}
			s := limitStep{limits: newLimiter(&fakeQuota{used: map[string]int64{}}), plans: dir}
			x := call{client: clientAddr{ip: "198.51.100.7"}, surface: surface{api: tc.api},
				caller: caller{project: tenancy.Project{ID: "p1", Plan: tc.plan}, kind: identity.KindApp}}
			accepted := 0
			for range tc.requests {
				res := serveStep(t, s, newReq("GET", "/v1/customers"), x)
				switch {
				case res.next != nil:
					accepted++
				case tc.down && res.rec.Code != http.StatusServiceUnavailable,
					!tc.down && res.rec.Code != http.StatusTooManyRequests:
					t.Fatalf("answered %d (%s)", res.rec.Code, res.rec.Body)
				}
				if tc.header != "" && res.rec.Header().Get(tc.header) == "" {
					t.Fatalf("an answer without %s: %v", tc.header, res.rec.Header())
				}
			}
			if accepted != tc.accepted {
				t.Fatalf("%d of %d accepted, want %d", accepted, tc.requests, tc.accepted)
			}
		})
	}
}
