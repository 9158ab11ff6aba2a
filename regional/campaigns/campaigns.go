// Package campaigns serves /v1/campaigns, the one view of a project's
// campaigns of every type. Loyalty programs live in the campaigns table
// with campaign_type LOYALTY_PROGRAM and are read through the loyalty
// package that writes them; the other types (discount coupons, gift
// vouchers, promotions, referral programs) arrive with issue 18's vouchers.
package campaigns

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

// Types are the interface's campaign types.
var Types = []string{"PROMOTION", "GIFT_VOUCHERS", "REFERRAL_PROGRAM", "DISCOUNT_COUPONS", "LOYALTY_PROGRAM"}

type handler struct{ programs *loyalty.Service }

// Register mounts the campaign endpoints on the /v1 group.
func Register(g *echo.Group, programs *loyalty.Service) {
	h := handler{programs}
	g.GET("/campaigns", h.list)
	g.GET("/campaigns/:campaignId", h.get)
}

func (h handler) list(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{DefaultLimit: 10, Orders: []string{"created_at", "-created_at"}, Pages: true})
	if err != nil {
		return err
	}
	lq.Key = "id" // creation order is id order
	typ := q.Get("campaign_type")
	known := typ == ""
	for _, t := range Types {
		known = known || t == typ
	}
	if !known {
		return apierr.InvalidQuery("campaign_type", "must be one of PROMOTION, GIFT_VOUCHERS, REFERRAL_PROGRAM, DISCOUNT_COUPONS, LOYALTY_PROGRAM")
	}
	var out []loyalty.CampaignView
	total, more, next := 0, false, ""
	if typ == "" || typ == "LOYALTY_PROGRAM" { // the only type a project can hold yet
		if out, total, more, next, err = h.programs.ListCampaigns(c.Request().Context(), httpx.ProjectID(c), lq); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, listq.List[loyalty.CampaignView]{DataRef: "campaigns", Data: out, Total: &total, More: more, Next: next})
}

func (h handler) get(c echo.Context) error {
	return httpx.Reply(c)(h.programs.GetCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")))
}
