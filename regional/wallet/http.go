package wallet

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// Register mounts GET /v1/customers/{customerId}/redeemables.
func Register(g *echo.Group, w *Wallet) {
	g.GET("/customers/:customerId/redeemables", func(c echo.Context) error {
		q := c.QueryParams()
		// The reference pages the wallet by cursor only, ordered by id.
		lq, err := listq.Parse(q, listq.Spec{})
		if err != nil {
			return err
		}
		f, err := filters.Parse(q, Columns{}.Fields())
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		page, total, more, next, err := w.List(ctx, httpx.ProjectID(c), c.Param("customerId"),
			Query{Filter: f, After: lq.After, Desc: lq.Desc, Limit: lq.Limit})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, listq.List[View]{Data: page, Total: &total, More: more, Next: next})
	})
}
