package categories

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

type handler struct{ svc *Service }

// Register mounts /v1/categories on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/categories", h.create)
	g.GET("/categories", h.list)
	g.GET("/categories/:categoryId", h.get)
	g.PUT("/categories/:categoryId", h.update)
	g.DELETE("/categories/:categoryId", h.delete)
}

func (h handler) create(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Create(c.Request().Context(), httpx.ProjectID(c), r)
	})
}

func (h handler) list(c echo.Context) error {
	return httpx.Reply(c)(h.svc.List(c.Request().Context(), httpx.ProjectID(c)))
}

func (h handler) get(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Get(c.Request().Context(), httpx.ProjectID(c), c.Param("categoryId")))
}

func (h handler) update(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Update(c.Request().Context(), httpx.ProjectID(c), c.Param("categoryId"), r)
	})
}

func (h handler) delete(c echo.Context) error {
	if err := h.svc.Delete(c.Request().Context(), httpx.ProjectID(c), c.Param("categoryId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
