package categories

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

type handler struct{ svc *Service }

// Register mounts /v1/categories on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/categories", httpx.Create(svc.Create))
	g.GET("/categories", h.list)
	g.GET("/categories/:categoryId", httpx.Read("categoryId", svc.Get))
	g.PUT("/categories/:categoryId", httpx.Update("categoryId", svc.Update))
	g.DELETE("/categories/:categoryId", httpx.Delete("categoryId", svc.Delete))
}

func (h handler) list(c echo.Context) error {
	return httpx.Reply(c)(h.svc.List(c.Request().Context(), httpx.ProjectID(c)))
}
