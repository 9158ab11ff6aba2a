package router

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/tenancy"
)

// planResolver reads a plan's limits (tenancy.Resolver).
type planResolver interface {
	Plan(ctx context.Context, name string) (tenancy.Plan, error)
}

// limitStep applies a project's limits (ratelimit.go): its plan's
// requests a minute and an hour on the application API, its files and the
// OAuth endpoints, kept centrally by leases from the directory; on the
// client-side API, the per-address limit of the project's settings, kept
// by the region's ring of routers. The limits' headers go on the answer
// whatever it is; over a limit, it is 429. The management API has none.
type limitStep struct {
	limits *limiter
	plans  planResolver
}

func (s limitStep) serve(c echo.Context, x *call, next handler) error {
	var vs []verdict
	switch x.surface.api {
	case apiManagement:
		return next(c, x)
	case apiClient:
		p := x.caller.project
		vs = []verdict{s.limits.client(p.ID, x.client.ip, p.Settings.ClientLimit())}
	default:
		ctx := c.Request().Context()
		plan, err := s.plans.Plan(ctx, x.caller.project.Plan)
		if err != nil && !errors.Is(err, tenancy.ErrPlanNotFound) {
			return resolverError(err)
		}
		vs = s.limits.project(ctx, x.caller.project.ID, plan.RequestsPerMinute, plan.RequestsPerHour)
	}
	setHeaders(c.Response().Header(), vs, s.limits.now())
	for _, v := range vs {
		if v.refused {
			return tooMany()
		}
	}
	return next(c, x)
}
