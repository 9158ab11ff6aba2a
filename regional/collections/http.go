package collections

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

type handler struct{ svc *Service }

// Register mounts /v1/product-collections on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/product-collections", httpx.Create(svc.Create))
	g.GET("/product-collections", h.list)
	g.GET("/product-collections/:productCollectionId", httpx.Read("productCollectionId", svc.Get))
	g.DELETE("/product-collections/:productCollectionId", httpx.Delete("productCollectionId", svc.Delete))
	g.GET("/product-collections/:productCollectionId/products", h.products)
}

// listSpec: the reference pages both lists by page and limit. Its order
// enum is a copy of the vouchers list's; the orders a collection has
// (created_at, updated_at, type) are served, the others (code, campaign,
// category) refused by name.
var listSpec = listq.Spec{Pages: true, NoCursor: true, DefaultOrder: "-created_at",
	Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at", "type", "-type"}}

var orderKeys = map[string]string{"created_at": "created_at", "updated_at": "COALESCE(updated_at, created_at)", "type": "type"}

func (h handler) list(c echo.Context) error {
	lq, err := listq.Parse(c.QueryParams(), listSpec)
	if err != nil {
		return err
	}
	out, total, more, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[View]{Data: out, Total: &total, More: more})
}

// productsSpec: GET …/products pages by page and limit, and by the
// reference's starting_after (a creation time).
var productsSpec = listq.Spec{Pages: true, NoCursor: true, NoOrder: true}

func parseAfter(q url.Values) (time.Time, error) {
	s := q.Get("starting_after")
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, apierr.InvalidQuery("starting_after", "must be an ISO 8601 date-time, got "+strconv.Quote(s))
	}
	return t, nil
}

func (h handler) products(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, productsSpec)
	if err != nil {
		return err
	}
	if o := q.Get("order"); o != "" {
		// The reference's order enum is the vouchers list's; the products
		// of a collection are listed oldest first.
		return apierr.InvalidQuery("order", fmt.Sprintf("a collection's products are listed by creation, oldest first; got %q", o))
	}
	after, err := parseAfter(q)
	if err != nil {
		return err
	}
	data, total, err := h.svc.Products(c.Request().Context(), httpx.ProjectID(c), c.Param("productCollectionId"), after, lq)
	if err != nil {
		return err
	}
	more := lq.Offset()+len(data) < total
	return c.JSON(http.StatusOK, listq.List[any]{Data: data, Total: &total, More: more})
}
