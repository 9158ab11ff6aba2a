package router

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apiversion"
)

// versionStep chooses the API version a request is served at: the one
// its X-Voucherify-API-Version header names, else the project's pinned
// one, else the latest. The answer says which, and so does the request's
// span, named with the forward's own attributes in one call (forward.go).
// The management API and the OAuth endpoints have no dated versions.
type versionStep struct{}

func (versionStep) serve(c echo.Context, x *call, next handler) error {
	if a := x.surface.api; a == apiManagement || a == apiOAuth {
		return next(c, x)
	}
	req := c.Request()
	version := x.caller.project.APIVersion
	if version == "" {
		version = apiversion.Latest
	}
	if v := req.Header.Get(apiversion.Header); v != "" {
		if !apiversion.Known(v) {
			return apiversion.Invalid("The "+apiversion.Header+" header", v)
		}
		version = v
	}
	x.version = version
	c.Response().Header().Set(apiversion.Header, version)
	return next(c, x)
}
