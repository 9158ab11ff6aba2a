package httpx

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// WholePath answers 404 "No such endpoint" for a request whose path has
// more segments than the route it reached. Echo lets a route's last
// parameter take the rest of a path no other route matches, so
// /v1/rewards/rew_1/assignments reached GET /v1/rewards/:rewardId with the
// id "rew_1/assignments" and answered "Cannot find reward with id
// rew_1/assignments"; a client asking for an endpoint that does not exist
// is told so, whatever the route above it.
func WholePath() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if route == "" || strings.HasSuffix(route, "*") || !strings.Contains(route, ":") {
				return next(c)
			}
			p := c.Request().URL.RawPath
			if p == "" {
				p = c.Request().URL.Path
			}
			if strings.Count(p, "/") > strings.Count(route, "/") {
				return echo.NewHTTPError(http.StatusNotFound)
			}
			return next(c)
		}
	}
}
