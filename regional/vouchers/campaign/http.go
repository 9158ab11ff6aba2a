package campaign

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

// Register mounts the campaign endpoints of vouchers on the /v1 group:
// adding vouchers to a campaign, and a campaign's transactions (a gift
// campaign's credits or, through programs, a loyalty program's points).
// /v1/campaigns itself is regional/campaigns'.
func Register(g *echo.Group, svc *Service, programs *loyalty.Service) {
	g.POST("/campaigns/:campaignId/vouchers", svc.addVouchers)
	g.POST("/campaigns/:campaignId/vouchers/:code", svc.addVouchers)
	g.GET("/campaigns/:campaignId/transactions", svc.transactions(programs))
}

// transactions lists a campaign's ledger entries: a gift campaign's
// credits, or a loyalty program's points.
func (s *Service) transactions(programs *loyalty.Service) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, project, key := c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")
		tq, err := loyalty.ParseTxQuery(c.QueryParams())
		if err != nil {
			return err
		}
		ts, more, next, found, err := s.CampaignTransactions(ctx, project, key, tq)
		if err == nil && !found {
			ts, more, next, err = programs.ListTransactions(ctx, loyalty.CardRef{Project: project, Campaign: key}, tq)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, listq.List[loyalty.Transaction]{Data: ts, More: more, Next: next})
	}
}

// addVouchers serves POST /v1/campaigns/{campaignId}/vouchers[/{code}]:
// one voucher answered with 200, more (vouchers_count > 1) as an async
// action answered with 202.
func (s *Service) addVouchers(c echo.Context) error {
	n := int64(1)
	if q := c.QueryParam("vouchers_count"); q != "" {
		var err error
		if n, err = strconv.ParseInt(q, 10, 64); err != nil {
			return apierr.InvalidQuery("vouchers_count", "must be a whole number")
		}
	}
	a := AddRequest{Campaign: c.Param("campaignId"), Code: c.Param("code"), Count: n}
	if c.Request().ContentLength != 0 {
		if err := httpx.Bind(c, &a.Voucher); err != nil {
			return err
		}
	}
	v, async, err := s.AddVouchers(c.Request().Context(), httpx.ProjectID(c), a)
	if err != nil {
		return err
	}
	if async {
		return c.JSON(http.StatusAccepted, v)
	}
	return c.JSON(http.StatusOK, v)
}
