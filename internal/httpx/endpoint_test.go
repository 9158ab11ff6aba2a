package httpx_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

// A path longer than the route its last parameter reached is no endpoint:
// echo would hand the rest of the path to that parameter.
func TestAPathPastARouteIsNoSuchEndpoint(t *testing.T) {
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.GET("/v1/rewards/:rewardId", func(c echo.Context) error { return c.String(200, c.Param("rewardId")) })
	e.GET("/v1/loyalties/:campaignId/tiers/:tierId", func(c echo.Context) error { return c.String(200, c.Param("tierId")) })
	e.GET("/files/*", func(c echo.Context) error { return c.String(200, c.Param("*")) })
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/v1/rewards/rew_1", 200, "rew_1"},
		{"/v1/rewards/a%2Fb", 200, "a%2Fb"},
		{"/v1/rewards/rew_1/assignments", 404, ""},
		{"/v1/rewards/rew_1/a/b", 404, ""},
		{"/v1/loyalties/c/tiers/t/rewards", 404, ""},
		{"/v1/loyalties/c/tiers/t", 200, "t"},
		{"/files/a/b/c", 200, "a/b/c"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		if rec.Code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.path, rec.Code, rec.Body, c.code)
		}
		if c.code == 404 {
			var body struct{ Key, Details string }
			if json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Key != "not_found" || body.Details != "No such endpoint." {
				t.Fatalf("%s: %s", c.path, rec.Body)
			}
		} else if rec.Body.String() != c.body {
			t.Fatalf("%s: %q, want %q", c.path, rec.Body, c.body)
		}
	}
}
