package router

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// The client-side API (/client/v1/…) at the edge: browsers call it from the
// project's allowed website URLs (client_trusted_domains). A CORS preflight
// carries no credentials, so it is answered here, without reaching a
// region, for an origin that some project of the cluster trusts; the
// request that follows is held to its own project's list (and a
// customer-bound token to its one origin), and refused with 403 and no
// CORS headers otherwise, which the browser turns into a blocked request.
// None of this runs on /v1.

// The CORS answer. The allowed headers are what the client SDK sends.
const (
	corsAllowHeaders  = "X-Client-Application-Id, X-Client-Token, Content-Type, X-Voucherify-Channel, X-Voucherify-Double-Opt-In, Authorization"
	corsAllowMethods  = "GET, POST, PUT, DELETE"
	corsMaxAge        = "7200" // seconds; Chromium's cap
	corsExposeHeaders = "X-Rate-Limit-Limit, X-Rate-Limit-Remaining, X-Rate-Limit-Retry, Retry-After, RateLimit, RateLimit-Policy, " +
		"X-Voucherify-API-Version, X-Request-Id"
)

// clientCORS marks the answer readable by origin's page when some project of
// the cluster trusts it (so that even a 401 reaches the page's script), and
// answers a preflight. done says the request has been answered.
func (r *Router) clientCORS(c echo.Context, cluster, origin string) (done bool, err error) {
	req := c.Request()
	preflight := req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != ""
	trusted, err := r.cfg.Resolver.ClusterOrigins(req.Context(), cluster)
	if err != nil {
		if preflight {
			return true, resolverError(err)
		}
		return false, nil // the project's own list decides, below
	}
	allowed := origin != "" && trusted.Allows(origin)
	if allowed {
		allowOrigin(c.Response().Header(), origin)
	}
	if !preflight {
		return false, nil
	}
	if !allowed {
		return true, originRefused(fmt.Sprintf("No project of this cluster lists the origin %q among its allowed website URLs "+
			"(client_trusted_domains).", origin))
	}
	h := c.Response().Header()
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	return true, c.NoContent(http.StatusNoContent)
}

func allowOrigin(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
}

// clientOrigin holds a client-side request to its project's allowed
// origins and a bound token to its origin; a refusal carries no CORS
// headers.
func clientOrigin(c echo.Context, p tenancy.Project, t tenancy.Token, origin string) error {
	h := c.Response().Header()
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
		return nil
	}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary"} {
		h.Del(k)
	}
	return originRefused(why)
}

func originRefused(details string) *apierr.Error {
	return apierr.New(http.StatusForbidden, "origin_not_allowed", "Forbidden", details)
}
