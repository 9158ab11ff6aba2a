package router

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

const (
	clientPrefix     = "/client/"
	managementPrefix = "/management/"
)

// surfaceStep tells which API a request is for, from its path and the
// kind of host it came to: an API host serves the application, client,
// management and OAuth APIs, a download host export files only.
type surfaceStep struct {
	// management says a management service is configured.
	management bool
}

func (s surfaceStep) serve(c echo.Context, x *call, next handler) error {
	req := c.Request()
	path := req.URL.Path
	apiHost := x.route.kind == tenancy.APIHost
	switch {
	case apiHost && strings.HasPrefix(path, managementPrefix):
		if !s.management {
			return apierr.Unavailable("The management service is not configured on this router.")
		}
		x.surface = surface{api: apiManagement}
		return next(c, x)
	case apiHost && strings.HasPrefix(path, oauthPrefix):
		if req.Method != http.MethodPost {
			return apierr.New(http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed", "This endpoint accepts POST.")
		}
		x.surface = surface{api: apiOAuth}
		return next(c, x)
	}
	exportID, isExport := exportOf(req)
	if x.route.kind == tenancy.DownloadHost && !isExport {
		return notOnDownloadHost(req)
	}
	x.surface = surface{api: apiApp, exportID: exportID, file: isExport && (x.route.kind == tenancy.DownloadHost || wantsFile(req))}
	if strings.HasPrefix(path, clientPrefix) {
		x.surface.api = apiClient
	}
	return next(c, x)
}
