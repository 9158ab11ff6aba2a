package campaigns

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// StackedCounter counts a campaign's stacked redemptions within a period
// (regional/engine's).
type StackedCounter interface {
	CampaignCounts(ctx context.Context, projectID, campaignID string, p Period) (Stacked, error)
}

// PublicationCounter counts a campaign's publications within a period,
// successful and failed (regional/publications').
type PublicationCounter interface {
	Counts(ctx context.Context, projectID, campaignID string, p Period) (ok, failed int64, err error)
}

// Counters are the figures of a summary that other owners keep.
type Counters struct {
	Stacked      StackedCounter
	Publications PublicationCounter
}

type handler struct {
	*Registry
	counters Counters
}

// Register mounts the /v1/campaigns endpoints on the /v1 group: every type
// at once for lists, enabling, disabling and deletion; through the
// campaign's kind in r for the rest.
func Register(g *echo.Group, r *Registry, counters Counters) {
	h := handler{Registry: r, counters: counters}
	g.POST("/campaigns", h.create)
	g.GET("/campaigns", h.list)
	g.GET("/campaigns/:campaignId", h.get)
	g.PUT("/campaigns/:campaignId", h.update)
	g.DELETE("/campaigns/:campaignId", h.delete)
	g.POST("/campaigns/:campaignId/enable", h.setActive(true))
	g.POST("/campaigns/:campaignId/disable", h.setActive(false))
	g.GET("/campaigns/:campaignId/summary", h.summary)
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
	// Areas and stores are not a notion here.
	if err := listq.Unserved(q, "access_settings"); err != nil {
		return err
	}
	f := Filter{Types: slices.Clone(Types)}
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
	if f.Filter, err = filters.Parse(q, Fields); err != nil {
		return err
	}
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	out := []any{}
	total, more, next := 0, false, ""
	if len(f.Types) > 0 {
		cs, n, err := ListWhere[json.RawMessage](ctx, h.svc.pool, project, f, lq, h.svc.Now())
		if err != nil {
			return err
		}
		var views []View[json.RawMessage]
		views, more, next = listq.PageOf(cs, lq.Limit, func(c Campaign[json.RawMessage]) string { return c.ID },
			Campaign[json.RawMessage].ViewOf)
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
	var common CommonUpdate
	if err := Decode(raw, &common); err != nil {
		return err
	}
	if err := CheckValidity(common.ValidityTimeframe, common.ValidityDayOfWeek, common.ValidityHours); err != nil {
		return err
	}
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	id, _, k, err := h.kindOf(ctx, project, c.Param("campaignId"))
	if err != nil {
		return err
	}
	return httpx.Reply(c)(k.Update(ctx, project, id, raw))
}

func (h handler) setActive(active bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		return httpx.Reply(c)(h.svc.SetActive(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), active))
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
	id, err := h.svc.Remove(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), force)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]*string{"async_action_id": id})
}

// summary serves GET /v1/campaigns/{campaignId}/summary: the campaign and
// its figures within start_date and end_date (days, both included), in the
// shape of its type. Redemptions count the stacked redemptions (POST
// /v1/redemptions) of the campaign's vouchers and tiers and the type's own
// (a loyalty program's reward redemptions); validations are not stored, so
// they count 0.
func (h handler) summary(c echo.Context) error {
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	var p Period
	for _, b := range []struct {
		name string
		dst  **time.Time
		add  int
	}{{"start_date", &p.From, 0}, {"end_date", &p.To, 1}} {
		if v := c.QueryParam(b.name); v != "" {
			d, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return apierr.InvalidQuery(b.name, "must be a date, YYYY-MM-DD")
			}
			d = d.AddDate(0, 0, b.add)
			*b.dst = &d
		}
	}
	if p.From != nil && p.To != nil && !p.To.After(*p.From) {
		return apierr.InvalidQuery("end_date", "must not be before start_date")
	}
	id, _, k, err := h.kindOf(ctx, project, c.Param("campaignId"))
	if err != nil {
		return err
	}
	view, err := k.Get(ctx, project, id)
	if err != nil {
		return err
	}
	s := map[string]any{"object": "campaign_summary", "campaign": view}
	for _, f := range []string{"redemptions", "redemptions_succeeded", "redemptions_failed", "rollbacks", "rollbacks_succeeded",
		"rollbacks_failed", "validations", "validations_succeeded", "validations_failed", "orders_amount", "orders_rolledback_amount"} {
		s[f] = 0
	}
	var st Stacked
	if h.counters.Stacked != nil {
		if st, err = h.counters.Stacked.CampaignCounts(ctx, project, id, p); err != nil {
			return err
		}
	}
	own, err := k.Summary(ctx, project, id, p, st)
	if err != nil {
		return err
	}
	s["redemptions"], s["redemptions_succeeded"], s["redemptions_failed"] = own.Redeemed+st.Redemptions, own.Redeemed+st.Succeeded, st.Failed
	s["rollbacks"], s["rollbacks_succeeded"] = own.RolledBack+st.RolledBack, own.RolledBack+st.RolledBack
	if own.Vouchers {
		ok, failed, err := h.counters.Publications.Counts(ctx, project, id, p)
		if err != nil {
			return err
		}
		s["vouchers_created"], s["vouchers_deleted"] = own.VouchersCreated, 0
		s["publications"], s["publications_succeeded"], s["publications_failed"] = ok+failed, ok, failed
	}
	for f, v := range own.Figures {
		s[f] = v
	}
	return c.JSON(http.StatusOK, s)
}

// Discounts are a summary's figures of discounts given (discount,
// referral and promotion campaigns).
func Discounts(st Stacked) map[string]any {
	return map[string]any{"discounted_amount": st.Discounted, "rolledback_discounted_amount": st.RolledBackDiscount}
}

// ItemRef names a row that belongs to a campaign (an earning rule, a reward
// assignment, a tier, a stack, a referral code's holder…) the way a
// request's path does: …/{campaignId}/…/{id}, in a project; Campaign is
// the campaign's id or name.
type ItemRef struct {
	Project, Campaign, ID string
}

// ItemRefOf is the ItemRef a request's path names, its item in param (""
// for a path that names none yet: a create).
func ItemRefOf(c echo.Context, param string) ItemRef {
	return ItemRef{Project: httpx.ProjectID(c), Campaign: c.Param("campaignId"), ID: c.Param(param)}
}
