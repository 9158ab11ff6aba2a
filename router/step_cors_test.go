package router

import (
	"errors"
	"net/http"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func TestCORSStepAnswersPreflightsForTheClusterOrigins(t *testing.T) {
	const shop = "https://shop.example"
	cases := []struct {
		name      string
		api       api
		method    string
		origin    string
		down      bool
		code      int    // 0: handed on
		allowedTo string // Access-Control-Allow-Origin on the answer
	}{
		{"preflight from a trusted origin", apiClient, "OPTIONS", shop, false, http.StatusNoContent, shop},
		{"preflight from another origin", apiClient, "OPTIONS", "https://evil.example", false, http.StatusForbidden, ""},
		{"preflight, directory unreachable", apiClient, "OPTIONS", shop, true, http.StatusServiceUnavailable, ""},
		{"request from a trusted origin", apiClient, "POST", shop, false, 0, shop},
		{"request from another origin: its project decides", apiClient, "POST", "https://evil.example", false, 0, ""},
		{"request, directory unreachable: its project decides", apiClient, "POST", shop, true, 0, ""},
		{"not the client-side API", apiApp, "OPTIONS", shop, false, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := &fakeDirectory{origins: tenancy.CompileOrigins([]string{shop})}
			if tc.down {
				dir.err = errors.New("down")
			}
			req := newReq(tc.method, "/client/v1/validations", "Origin", tc.origin, "Access-Control-Request-Method", "POST")
			res := serveStep(t, corsStep{origins: dir}, req, call{surface: surface{api: tc.api}})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			h := res.rec.Header()
			if got := h.Get("Access-Control-Allow-Origin"); got != tc.allowedTo {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, tc.allowedTo)
			}
			if tc.code == http.StatusNoContent && (h.Get("Access-Control-Allow-Headers") == "" || h.Get("Access-Control-Max-Age") != corsMaxAge) {
				t.Fatalf("a preflight's answer lacks its headers: %v", h)
			}
		})
	}
}
