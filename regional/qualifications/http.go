package qualifications

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

// Register mounts POST /qualifications on the /v1 group.
func Register(g *echo.Group, s *Service) {
	g.POST("/qualifications", func(c echo.Context) error {
		return httpx.WithBody(c, func(r Request) (any, error) {
			return s.Qualify(c.Request().Context(), httpx.ProjectID(c), r)
		})
	})
}
