package engine

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/engine/stacked"
)

// Register mounts the engine's endpoints on the /v1 group, and the reads
// and rollbacks of what it redeemed (regional/engine/stacked).
func Register(g *echo.Group, e *Engine) {
	g.POST("/validations", func(c echo.Context) error {
		return httpx.WithBody(c, func(r Request) (any, error) { return e.Validate(c.Request().Context(), httpx.ProjectID(c), r) })
	})
	g.POST("/redemptions", func(c echo.Context) error {
		return httpx.WithBody(c, func(r Request) (any, error) { return e.Redeem(c.Request().Context(), httpx.ProjectID(c), r) })
	})
	stacked.Register(g, e.stacked)
	g.DELETE("/vouchers/:code/sessions/:sessionKey", e.releaseSession)
}
