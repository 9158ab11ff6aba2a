package orders

import (
	"net/http"

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

type listView struct {
	Object            string `json:"object"`
	DataRef           string `json:"data_ref"`
	Orders            []View `json:"orders"`
	Total             int    `json:"total"`
	HasMore           bool   `json:"has_more"`
	MoreStartingAfter string `json:"more_starting_after,omitempty"`
}

func (h Handler) list(c echo.Context) error {
	q := c.QueryParams()
	limit, err := listq.Limit(q, 10)
	if err != nil {
		return err
	}
	order, err := listq.Order(q, "-created_at", "created_at", "-created_at", "updated_at", "-updated_at")
	if err != nil {
		return err
	}
	if err := listq.FirstPageOnly(q); err != nil {
		return err
	}
	vs, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), limit, order, q.Get("starting_after_id"))
	if err != nil {
		return err
	}
	if vs == nil {
		vs = []View{}
	}
	return c.JSON(http.StatusOK, listView{Object: "list", DataRef: "orders", Orders: vs, Total: total, HasMore: more, MoreStartingAfter: next})
}
