package router

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/tenancy"
)

// originStep holds a client-side request to its own project's allowed
// origins (client_trusted_domains), and a token bound to an origin to
// that origin; a refusal carries no CORS headers, which the browser turns
// into a blocked request.
type originStep struct{}

func (originStep) serve(c echo.Context, x *call, next handler) error {
	if x.surface.api != apiClient {
		return next(c, x)
	}
	origin := c.Request().Header.Get("Origin")
	h := c.Response().Header()
	p, t := x.caller.project, x.caller.token
	trusted := p.Settings.TrustsOrigin(origin)
	var why string
	switch {
	case t.Origin != "" && !tenancy.SameOrigin(origin, t.Origin):
		why = fmt.Sprintf("This access token is bound to the origin %s; the request came from %q.", t.Origin, origin)
	case !trusted && origin == "":
		why = "The client-side API is called from a website: send the Origin header, naming one of the project's allowed " +
			"website URLs (client_trusted_domains)."
	case !trusted:
		why = fmt.Sprintf("The origin %q is not among the project's allowed website URLs (client_trusted_domains).", origin)
	default:
		if origin != "" && h.Get("Access-Control-Allow-Origin") == "" {
			allowOrigin(h, origin)
		}
		return next(c, x)
	}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary"} {
		h.Del(k)
	}
	return originRefused(why)
}
