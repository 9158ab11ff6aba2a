package router

import (
	"context"
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
// customer-bound token to its one origin) by originStep, and refused with
// 403 and no CORS headers otherwise, which the browser turns into a
// blocked request. None of this runs on /v1.

// The CORS answer. The allowed headers are what the client SDK sends.
const (
	corsAllowHeaders  = "X-Client-Application-Id, X-Client-Token, Content-Type, X-Voucherify-Channel, X-Voucherify-Double-Opt-In, Authorization"
	corsAllowMethods  = "GET, POST, PUT, DELETE"
	corsMaxAge        = "7200" // seconds; Chromium's cap
	corsExposeHeaders = "X-Rate-Limit-Limit, X-Rate-Limit-Remaining, X-Rate-Limit-Retry, Retry-After, RateLimit, RateLimit-Policy, " +
		"X-Voucherify-API-Version, X-Request-Id"
)

// originsResolver lists the origins some project of a cluster trusts
// (tenancy.Resolver).
type originsResolver interface {
	ClusterOrigins(ctx context.Context, cluster string) (tenancy.Origins, error)
}

// corsStep marks a client-side answer readable by the origin's page when
// some project of the cluster trusts it (so that even a 401 reaches the
// page's script), and answers a preflight.
type corsStep struct {
	origins originsResolver
}

func (s corsStep) serve(c echo.Context, x *call, next handler) error {
	if x.surface.api != apiClient {
		return next(c, x)
	}
	req := c.Request()
	origin := req.Header.Get("Origin")
	preflight := req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != ""
	trusted, err := s.origins.ClusterOrigins(req.Context(), x.route.cluster.Name)
	if err != nil {
		if preflight {
			return resolverError(err)
		}
		return next(c, x) // the project's own list decides (originStep)
	}
	allowed := origin != "" && trusted.Allows(origin)
	if allowed {
		allowOrigin(c.Response().Header(), origin)
	}
	if !preflight {
		return next(c, x)
	}
	if !allowed {
		return originRefused(fmt.Sprintf("No project of this cluster lists the origin %q among its allowed website URLs "+
			"(client_trusted_domains).", origin))
	}
	h := c.Response().Header()
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	return c.NoContent(http.StatusNoContent)
}

func allowOrigin(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
}

func originRefused(details string) *apierr.Error {
	return apierr.New(http.StatusForbidden, "origin_not_allowed", "Forbidden", details)
}
