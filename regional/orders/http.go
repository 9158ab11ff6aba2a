package orders

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// Handler serves the order endpoints.
type Handler struct{ svc *Service }

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := Handler{svc}
	g.POST("/orders", h.create)
	g.POST("/orders/import", h.importOrders)
	g.GET("/orders", h.list)
	g.GET("/orders/:orderId", h.get)
	g.PUT("/orders/:orderId", h.update)
}

func (h Handler) create(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Upsert(c.Request().Context(), httpx.ProjectID(c), r)
	})
}

func (h Handler) update(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Update(c.Request().Context(), httpx.ProjectID(c), c.Param("orderId"), r)
	})
}

func (h Handler) get(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Get(c.Request().Context(), httpx.ProjectID(c), c.Param("orderId")))
}

// listSpec is GET /v1/orders' paging.
var listSpec = listq.Spec{Orders: []string{"-created_at", "created_at", "updated_at", "-updated_at"}, Pages: true}

func (h Handler) list(c echo.Context) error {
	return httpx.WithList(c, listSpec, func(lq listq.Query) (any, error) {
		vs, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
		return listq.List[View]{DataRef: "orders", Data: vs, Total: &total, More: more, Next: next}, err
	})
}
