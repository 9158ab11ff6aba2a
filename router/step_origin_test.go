package router

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func TestOriginStepHoldsAClientRequestToItsProjectsOrigins(t *testing.T) {
	const shop = "https://shop.example"
	project := tenancy.Project{ID: "p1", Settings: tenancy.Settings{ClientTrustedDomains: []string{shop}}}
	cases := []struct {
		name     string
		api      api
		origin   string
		token    tenancy.Token
		clusters string // Access-Control-Allow-Origin the CORS step set
		code     int
		allowed  string
	}{
		{"the project's origin", apiClient, shop, tenancy.Token{}, "", 0, shop},
		{"the project's origin, already allowed", apiClient, shop, tenancy.Token{}, shop, 0, shop},
		{"another project's origin", apiClient, "https://other.example", tenancy.Token{}, "https://other.example", http.StatusForbidden, ""},
		{"no Origin", apiClient, "", tenancy.Token{}, "", http.StatusForbidden, ""},
		{"a token bound to its origin", apiClient, shop, tenancy.Token{Binding: tenancy.Binding{Origin: shop}}, "", 0, shop},
		{"a token bound to another origin", apiClient, shop, tenancy.Token{Binding: tenancy.Binding{Origin: "https://b.example"}}, shop, http.StatusForbidden, ""},
		{"the application API is not held", apiApp, "https://other.example", tenancy.Token{}, "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := stepFunc(func(c echo.Context, x *call, next handler) error {
				if tc.clusters != "" {
					allowOrigin(c.Response().Header(), tc.clusters)
				}
				return originStep{}.serve(c, x, next)
			})
			res := serveStep(t, s, newReq("GET", "/client/v1/promotions/tiers", "Origin", tc.origin),
				call{surface: surface{api: tc.api}, caller: caller{project: project, token: tc.token}})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if got := res.rec.Header().Get("Access-Control-Allow-Origin"); got != tc.allowed {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, tc.allowed)
			}
			if tc.code != 0 && (res.key() != "origin_not_allowed" || res.rec.Header().Get("Vary") != "") {
				t.Fatalf("a refusal must be origin_not_allowed without CORS headers: %s %v", res.rec.Body, res.rec.Header())
			}
		})
	}
}
