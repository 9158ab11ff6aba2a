package vouchers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

type handler struct{ svc *Service }

// Register mounts the voucher endpoints on the /v1 group (the campaign
// endpoints of vouchers are regional/vouchers/campaign's).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/vouchers", h.create)
	g.GET("/vouchers", h.list)
	g.POST("/vouchers/:code", h.create)
	g.GET("/vouchers/:code", httpx.Read("code", svc.Get))
	g.PUT("/vouchers/:code", httpx.Update("code", svc.Update))
	g.DELETE("/vouchers/:code", h.delete)
	g.POST("/vouchers/:code/enable", h.enable)
	g.POST("/vouchers/:code/disable", h.disable)
	g.POST("/vouchers/:code/balance", h.balance)
	g.GET("/vouchers/:code/transactions", h.transactions)
}

func (h handler) balance(c echo.Context) error {
	return httpx.WithBody(c, func(r BalanceRequest) (any, error) {
		return h.svc.UpdateBalance(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), r)
	})
}

func (h handler) transactions(c echo.Context) error {
	tq, err := loyalty.ParseTxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ts, more, next, err := h.svc.Transactions(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), tq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[loyalty.Transaction]{Data: ts, More: more, Next: next})
}

func (h handler) create(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Create(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), r)
	})
}

func (h handler) delete(c echo.Context) error {
	force := false
	if f := c.QueryParam("force"); f != "" {
		var err error
		if force, err = strconv.ParseBool(f); err != nil {
			return apierr.InvalidQuery("force", "must be true or false")
		}
	}
	if err := h.svc.Delete(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), force); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h handler) enable(c echo.Context) error {
	return httpx.Reply(c)(h.svc.SetActive(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), true))
}

func (h handler) disable(c echo.Context) error {
	return httpx.Reply(c)(h.svc.SetActive(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), false))
}

func (h handler) list(c echo.Context) error {
	lq, err := ParseList(c.QueryParams())
	if err != nil {
		return err
	}
	vs, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[View]{DataRef: "vouchers", Data: vs, Total: &total, More: more, Next: next})
}
