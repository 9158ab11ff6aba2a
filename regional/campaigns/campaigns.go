// Package campaigns serves /v1/campaigns, the one campaign model of every
// type: its rows are regional/loyalty's campaigns table (campaign_rows.go,
// the only code that writes it), and what differs by type is the voucher
// template and what hangs off a campaign: loyalty cards (regional/loyalty),
// discount, gift and referral vouchers (regional/vouchers), promotion tiers
// (a Kind registered by their package). This package reads and lists
// campaigns of every type at once, and creates, updates, enables,
// disables, deletes and summarises them through their type's owner.
package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/publications"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Types are the interface's campaign types.
var Types = []string{"PROMOTION", "GIFT_VOUCHERS", "REFERRAL_PROGRAM", "DISCOUNT_COUPONS", "LOYALTY_PROGRAM"}

const typesList = "PROMOTION, GIFT_VOUCHERS, REFERRAL_PROGRAM, DISCOUNT_COUPONS or LOYALTY_PROGRAM"

// Kind is what a package that owns a campaign type adds to the model:
// creating a campaign of the type from the request body, reading one (the
// view with what hangs off it), updating its type-specific part, and
// dropping what hangs off a deleted one (in CAMPAIGN.VOUCHERS_DELETE).
type Kind struct {
	Create func(ctx context.Context, projectID string, raw json.RawMessage) (any, error)
	Get    func(ctx context.Context, projectID, id string) (any, error)
	Update func(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error)
	// Summary adds the type's own figures within a period to its summary
	// (nil: none).
	Summary func(ctx context.Context, projectID, id string, p loyalty.Period) (map[string]any, error)
}

// Deps are the services behind the campaign endpoints.
type Deps struct {
	Programs     *loyalty.Service
	Vouchers     *vouchers.Service
	Publications *publications.Service
	Redemptions  *redemptions.Service
	Clock        func() time.Time
	// Stacked counts a campaign's stacked redemptions (the engine's).
	Stacked func(ctx context.Context, projectID, campaignID string, p loyalty.Period) (engine.CampaignCounts, error)
	// Kinds are the campaign types served by other packages (PROMOTION,
	// REFERRAL_PROGRAM).
	Kinds map[string]Kind
}

type handler struct {
	Deps
	kinds map[string]Kind
}

// Register mounts the campaign endpoints on the /v1 group.
func Register(g *echo.Group, d Deps) {
	h := handler{Deps: d, kinds: map[string]Kind{}}
	h.kinds["LOYALTY_PROGRAM"] = Kind{
		Create: func(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
			var r loyalty.CreateRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return d.Programs.CreateCampaign(ctx, projectID, r)
		},
		Get: func(ctx context.Context, projectID, id string) (any, error) {
			return d.Programs.GetCampaign(ctx, projectID, id)
		},
		Update: func(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
			var r loyalty.UpdateRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return d.Programs.UpdateCampaign(ctx, projectID, id, r)
		},
	}
	voucherKind := Kind{
		Create: func(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
			var r vouchers.CampaignRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return d.Vouchers.CreateCampaign(ctx, projectID, r)
		},
		Get: func(ctx context.Context, projectID, id string) (any, error) {
			return d.Vouchers.GetCampaign(ctx, projectID, id)
		},
		Update: h.updateVoucherCampaign,
	}
	for _, t := range vouchers.CampaignTypes {
		h.kinds[t] = voucherKind
	}
	for t, k := range d.Kinds {
		h.kinds[t] = k
	}
	g.POST("/campaigns", h.create)
	g.GET("/campaigns", h.list)
	g.GET("/campaigns/:campaignId", h.get)
	g.PUT("/campaigns/:campaignId", h.update)
	g.DELETE("/campaigns/:campaignId", h.delete)
	g.POST("/campaigns/:campaignId/enable", h.setActive(true))
	g.POST("/campaigns/:campaignId/disable", h.setActive(false))
	g.GET("/campaigns/:campaignId/summary", h.summary)
	g.POST("/campaigns/:campaignId/vouchers", d.Vouchers.AddVouchersHandler)
	g.POST("/campaigns/:campaignId/vouchers/:code", d.Vouchers.AddVouchersHandler)
	g.GET("/campaigns/:campaignId/transactions", h.transactions)
}

func decode(raw json.RawMessage, dst any) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	return nil
}

// kindOf finds a live campaign's type and id, and the type's owner.
func (h handler) kindOf(ctx context.Context, projectID, idOrName string) (id, typ string, k Kind, err error) {
	id, typ, err = loyalty.CampaignTypeOf(ctx, h.Programs.Pool(), projectID, idOrName)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", Kind{}, apierr.NotFound("campaign", idOrName)
	}
	if err != nil {
		return "", "", Kind{}, err
	}
	k, ok := h.kinds[typ]
	if !ok {
		return "", "", Kind{}, apierr.New(http.StatusBadRequest, "feature_not_available", "Feature not available",
			"campaigns of type "+typ+" are not served yet")
	}
	return id, typ, k, nil
}

// transactions lists a campaign's ledger entries: a gift campaign's
// credits, or a loyalty program's points.
func (h handler) transactions(c echo.Context) error {
	ctx, project, key := c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")
	tq, err := loyalty.ParseTxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ts, more, next, found, err := h.Vouchers.CampaignTransactions(ctx, project, key, tq)
	if err == nil && !found {
		ts, more, next, err = h.Programs.ListTransactions(ctx, project, key, "", tq)
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
	if head.CampaignType == nil {
		return apierr.InvalidPayload("campaign_type is required: " + typesList)
	}
	if !slices.Contains(Types, *head.CampaignType) {
		return apierr.InvalidPayload("campaign_type must be one of " + typesList)
	}
	k, ok := h.kinds[*head.CampaignType]
	if !ok {
		return apierr.New(http.StatusBadRequest, "feature_not_available", "Feature not available",
			"campaign_type "+*head.CampaignType+" is not served yet")
	}
	return httpx.Reply(c)(k.Create(c.Request().Context(), httpx.ProjectID(c), raw))
}

func (h handler) list(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{DefaultLimit: 10, Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"},
		Pages: true})
	if err != nil {
		return err
	}
	f := loyalty.CampaignFilter{Types: slices.Clone(Types)}
	if typ := q.Get("campaign_type"); typ != "" {
		if !slices.Contains(Types, typ) {
			return apierr.InvalidQuery("campaign_type", "must be one of "+typesList)
		}
		f.Types = []string{typ}
	}
	// Referral codes are the codes of referral programs.
	switch q.Get("is_referral_code") {
	case "":
	case "true":
		f.Types = slices.DeleteFunc(f.Types, func(t string) bool { return t != "REFERRAL_PROGRAM" })
	case "false":
		f.Types = slices.DeleteFunc(f.Types, func(t string) bool { return t == "REFERRAL_PROGRAM" })
	default:
		return apierr.InvalidQuery("is_referral_code", "must be true or false")
	}
	switch f.Status = q.Get("campaign_status"); f.Status {
	case "", "DONE", "IN_PROGRESS", "FAILED", "DRAFT", "MODIFYING":
	default:
		return apierr.InvalidQuery("campaign_status", "must be one of DONE, IN_PROGRESS, FAILED, DRAFT, MODIFYING")
	}
	if f.Filter, err = filters.Parse(q, loyalty.CampaignFields); err != nil {
		return err
	}
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	out := []any{}
	total, more, next := 0, false, ""
	if len(f.Types) > 0 {
		cs, n, err := loyalty.ListCampaignsWhere[json.RawMessage](ctx, h.Programs.Pool(), project, f, lq, h.Clock())
		if err != nil {
			return err
		}
		var views []loyalty.CampaignViewOf[json.RawMessage]
		views, more, next = listq.PageOf(cs, lq.Limit, func(c loyalty.CampaignOf[json.RawMessage]) string { return c.ID },
			loyalty.CampaignOf[json.RawMessage].ViewOf)
		for _, v := range views {
			out = append(out, v)
		}
		total = n
	}
	return c.JSON(http.StatusOK, listq.List[any]{DataRef: "campaigns", Data: out, Total: &total, More: more, Next: next})
}

func (h handler) get(c echo.Context) error {
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	id, _, k, err := h.kindOf(ctx, project, c.Param("campaignId"))
	if err != nil {
		return err
	}
	return httpx.Reply(c)(k.Get(ctx, project, id))
}

func (h handler) update(c echo.Context) error {
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return err
	}
	var common loyalty.CommonUpdate
	if err := decode(raw, &common); err != nil {
		return err
	}
	if err := vouchers.CheckValidity(common.ValidityTimeframe, common.ValidityDayOfWeek, common.ValidityHours); err != nil {
		return err
	}
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	id, _, k, err := h.kindOf(ctx, project, c.Param("campaignId"))
	if err != nil {
		return err
	}
	return httpx.Reply(c)(k.Update(ctx, project, id, raw))
}

// updateVoucherCampaign updates a discount, gift or referral campaign: the
// common properties and the voucher template (discount or gift).
func (h handler) updateVoucherCampaign(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	var r struct {
		loyalty.CommonUpdate
		vouchers.TemplateUpdate
	}
	if err := decode(raw, &r); err != nil {
		return nil, err
	}
	c, err := loyalty.ChangeCampaign(ctx, h.Programs, projectID, id, loyalty.EventCampaignUpdated, vouchers.CampaignTypes,
		func(_ pgx.Tx, c *vouchers.Campaign) error {
			if err := loyalty.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
				return err
			}
			return r.TemplateUpdate.Apply(&c.Attrs.Voucher)
		})
	if err != nil {
		return nil, err
	}
	return c.ViewOf(), nil
}

func (h handler) setActive(active bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		return httpx.Reply(c)(h.Programs.SetCampaignActive(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), active))
	}
}

// delete answers 202 with the async action that deletes the campaign's
// vouchers (force) or, without force, null: the campaign is in the bin.
func (h handler) delete(c echo.Context) error {
	force := false
	switch c.QueryParam("force") {
	case "", "false":
	case "true":
		force = true
	default:
		return apierr.InvalidQuery("force", "must be true or false")
	}
	id, err := h.Programs.RemoveCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), force)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]*string{"async_action_id": id})
}
