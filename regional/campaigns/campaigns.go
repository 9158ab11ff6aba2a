// Package campaigns serves /v1/campaigns, the one view of a project's
// campaigns of every type. Each type's rows of the campaigns table are
// written by the package that owns the type: loyalty programs by
// regional/loyalty, discount and gift campaigns (and their vouchers) by
// regional/vouchers; this package dispatches to them and merges their lists.
package campaigns

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Types are the interface's campaign types.
var Types = []string{"PROMOTION", "GIFT_VOUCHERS", "REFERRAL_PROGRAM", "DISCOUNT_COUPONS", "LOYALTY_PROGRAM"}

type handler struct {
	programs *loyalty.Service
	vouchers *vouchers.Service
}

// Register mounts the campaign endpoints on the /v1 group.
func Register(g *echo.Group, programs *loyalty.Service, vs *vouchers.Service) {
	h := handler{programs, vs}
	g.POST("/campaigns", h.create)
	g.GET("/campaigns", h.list)
	g.GET("/campaigns/:campaignId", h.get)
	g.POST("/campaigns/:campaignId/vouchers", vs.AddVouchersHandler)
	g.POST("/campaigns/:campaignId/vouchers/:code", vs.AddVouchersHandler)
	g.GET("/campaigns/:campaignId/transactions", h.transactions)
}

// transactions lists a campaign's ledger entries: a discount or gift
// campaign's credits, or a loyalty program's points.
func (h handler) transactions(c echo.Context) error {
	ctx, project, key := c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")
	tq, err := loyalty.ParseTxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ts, more, next, found, err := h.vouchers.CampaignTransactions(ctx, project, key, tq)
	if err == nil && !found {
		ts, more, next, err = h.programs.ListTransactions(ctx, project, key, "", tq)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[loyalty.Transaction]{Data: ts, More: more, Next: next})
}

func (h handler) create(c echo.Context) error {
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return err
	}
	var head struct {
		CampaignType *string `json:"campaign_type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return apierr.InvalidPayload("the body must be a campaign object with campaign_type a string")
	}
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	decode := func(dst any) error {
		if err := json.Unmarshal(raw, dst); err != nil {
			return apierr.InvalidPayload("the campaign does not read: " + err.Error())
		}
		return nil
	}
	switch t := head.CampaignType; {
	case t == nil:
		return apierr.InvalidPayload("campaign_type is required: DISCOUNT_COUPONS, GIFT_VOUCHERS or LOYALTY_PROGRAM")
	case *t == "LOYALTY_PROGRAM":
		var r loyalty.CreateRequest
		if err := decode(&r); err != nil {
			return err
		}
		return httpx.Reply(c)(h.programs.CreateCampaign(ctx, project, r))
	case *t == "DISCOUNT_COUPONS" || *t == "GIFT_VOUCHERS":
		var r vouchers.CampaignRequest
		if err := decode(&r); err != nil {
			return err
		}
		return httpx.Reply(c)(h.vouchers.CreateCampaign(ctx, project, r))
	case *t == "PROMOTION" || *t == "REFERRAL_PROGRAM":
		return apierr.New(http.StatusBadRequest, "feature_not_available", "Feature not available",
			"campaign_type "+*t+" is not served yet: DISCOUNT_COUPONS, GIFT_VOUCHERS and LOYALTY_PROGRAM are")
	default:
		return apierr.InvalidPayload("campaign_type must be one of PROMOTION, GIFT_VOUCHERS, REFERRAL_PROGRAM, DISCOUNT_COUPONS, LOYALTY_PROGRAM")
	}
}

// listed is a campaign of any type in a list.
type listed struct {
	id string
	v  any
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
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	var all []listed
	total, more := 0, false
	if typ == "" || typ == "LOYALTY_PROGRAM" {
		ls, n, m, _, err := h.programs.ListCampaigns(ctx, project, lq)
		if err != nil {
			return err
		}
		for _, l := range ls {
			all = append(all, listed{l.ID, l})
		}
		total, more = total+n, more || m
	}
	if typ == "" || typ == "DISCOUNT_COUPONS" || typ == "GIFT_VOUCHERS" {
		vs, n, m, _, err := h.vouchers.ListCampaigns(ctx, project, typ, lq)
		if err != nil {
			return err
		}
		for _, v := range vs {
			all = append(all, listed{v.ID, v})
		}
		total, more = total+n, more || m
	}
	// Each part is a page in id order from the same cursor: merged, the
	// first limit of them are this page.
	sortByID(all, lq.Desc)
	next := ""
	if len(all) > lq.Limit {
		all, more = all[:lq.Limit], true
	}
	if more && len(all) > 0 {
		next = all[len(all)-1].id
	}
	out := make([]any, len(all))
	for i, l := range all {
		out[i] = l.v
	}
	return c.JSON(http.StatusOK, listq.List[any]{DataRef: "campaigns", Data: out, Total: &total, More: more, Next: next})
}

func sortByID(ls []listed, desc bool) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && (ls[j].id < ls[j-1].id) != desc && ls[j].id != ls[j-1].id; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

func (h handler) get(c echo.Context) error {
	ctx, project, key := c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")
	v, err := h.programs.GetCampaign(ctx, project, key)
	if ae, ok := err.(*apierr.Error); ok && ae.Status == http.StatusNotFound {
		return httpx.Reply(c)(h.vouchers.GetCampaign(ctx, project, key))
	}
	return httpx.Reply(c)(v, err)
}
