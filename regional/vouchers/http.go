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

// Register mounts the voucher endpoints on the /v1 group, with the
// campaign endpoints of vouchers: adding vouchers to a campaign, and a
// campaign's transactions (a gift campaign's credits or, through programs,
// a loyalty program's points). /v1/campaigns itself is regional/campaigns'.
func Register(g *echo.Group, svc *Service, programs *loyalty.Service) {
	h := handler{svc}
	g.POST("/campaigns/:campaignId/vouchers", svc.AddVouchersHandler)
	g.POST("/campaigns/:campaignId/vouchers/:code", svc.AddVouchersHandler)
	g.GET("/campaigns/:campaignId/transactions", h.campaignTransactions(programs))
	g.POST("/vouchers", h.create)
	g.GET("/vouchers", h.list)
	g.POST("/vouchers/:code", h.create)
	g.GET("/vouchers/:code", h.get)
	g.PUT("/vouchers/:code", h.update)
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

// campaignTransactions lists a campaign's ledger entries: a gift
// campaign's credits, or a loyalty program's points.
func (h handler) campaignTransactions(programs *loyalty.Service) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, project, key := c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")
		tq, err := loyalty.ParseTxQuery(c.QueryParams())
		if err != nil {
			return err
		}
		ts, more, next, found, err := h.svc.CampaignTransactions(ctx, project, key, tq)
		if err == nil && !found {
			ts, more, next, err = programs.ListTransactions(ctx, loyalty.CardRef{Project: project, Campaign: key}, tq)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, listq.List[loyalty.Transaction]{Data: ts, More: more, Next: next})
	}
}

func (h handler) create(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Create(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), r)
	})
}

func (h handler) get(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Get(c.Request().Context(), httpx.ProjectID(c), c.Param("code")))
}

func (h handler) update(c echo.Context) error {
	return httpx.WithBody(c, func(r Request) (any, error) {
		return h.svc.Update(c.Request().Context(), httpx.ProjectID(c), c.Param("code"), r)
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

// AddVouchers serves POST /v1/campaigns/{campaignId}/vouchers[/{code}]
// (mounted by regional/campaigns): one voucher answered with 200, more
// (vouchers_count > 1) as an async action answered with 202.
func (s *Service) AddVouchersHandler(c echo.Context) error {
	n := int64(1)
	if q := c.QueryParam("vouchers_count"); q != "" {
		var err error
		if n, err = strconv.ParseInt(q, 10, 64); err != nil {
			return apierr.InvalidQuery("vouchers_count", "must be a whole number")
		}
	}
	var r Request
	if c.Request().ContentLength != 0 {
		if err := httpx.Bind(c, &r); err != nil {
			return err
		}
	}
	v, async, err := s.AddVouchers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), c.Param("code"), n, r)
	if err != nil {
		return err
	}
	if async {
		return c.JSON(http.StatusAccepted, v)
	}
	return c.JSON(http.StatusOK, v)
}
