package loyalty

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// Handler serves the loyalty endpoints.
type Handler struct{ svc *Service }

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := Handler{svc}
	g.POST("/loyalties", h.createCampaign)
	g.GET("/loyalties", h.listCampaigns)
	g.GET("/loyalties/:campaignId", h.getCampaign)
	g.PUT("/loyalties/:campaignId", h.updateCampaign)
	g.DELETE("/loyalties/:campaignId", h.deleteCampaign)

	g.POST("/loyalties/:campaignId/members", h.addMember)
	g.GET("/loyalties/:campaignId/members", h.listMembers)
	g.GET("/loyalties/:campaignId/members/:memberId", h.getMember)
	g.GET("/loyalties/members/:memberId", h.getMember)

	g.POST("/loyalties/members/:memberId/balance", h.balance)
	g.POST("/loyalties/:campaignId/members/:memberId/balance", h.balance)
	g.POST("/loyalties/:campaignId/members/:memberId/transfers", h.transfer)

	g.GET("/loyalties/members/:memberId/transactions", h.transactions)
	g.GET("/loyalties/:campaignId/members/:memberId/transactions", h.transactions)
	g.GET("/loyalties/:campaignId/transactions", h.transactions)
	g.GET("/loyalties/members/:memberId/activity", h.activity)
	g.GET("/loyalties/:campaignId/members/:memberId/activity", h.activity)
	registerExpiration(g, h)
}

func (h Handler) createCampaign(c echo.Context) error {
	return httpx.WithBody(c, func(r CreateRequest) (any, error) {
		return h.svc.CreateCampaign(c.Request().Context(), httpx.ProjectID(c), r)
	})
}

func (h Handler) getCampaign(c echo.Context) error {
	return httpx.Reply(c)(h.svc.GetCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId")))
}

func (h Handler) updateCampaign(c echo.Context) error {
	return httpx.WithBody(c, func(r UpdateRequest) (any, error) {
		return h.svc.UpdateCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), r)
	})
}

func (h Handler) deleteCampaign(c echo.Context) error {
	id, err := h.svc.DeleteCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"async_action_id": id})
}

// cardListSpec is the paging of the campaign and member lists, ordered by
// creation, which is id order: by number as their reference pages them, and
// by the cursor.
var cardListSpec = listq.Spec{Orders: []string{"created_at", "-created_at", "id", "-id"}, Pages: true}

func (h Handler) listCampaigns(c echo.Context) error {
	return httpx.WithList(c, cardListSpec, func(lq listq.Query) (any, error) {
		cs, total, more, next, err := h.svc.ListCampaigns(c.Request().Context(), httpx.ProjectID(c), lq)
		return listq.List[CampaignView]{DataRef: "campaigns", Data: cs, Total: &total, More: more, Next: next}, err
	})
}

func (h Handler) addMember(c echo.Context) error {
	return httpx.WithBody(c, func(r MemberRequest) (any, error) {
		return h.svc.AddMember(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), r)
	})
}

func (h Handler) listMembers(c echo.Context) error {
	return httpx.WithList(c, cardListSpec, func(lq listq.Query) (any, error) {
		f, err := parseMemberFilter(c.QueryParams())
		if err != nil {
			return nil, err
		}
		cs, total, more, next, err := h.svc.ListMembers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), f, lq)
		return listq.List[CardView]{DataRef: "vouchers", Data: cs, Total: &total, More: more, Next: next}, err
	})
}

// CardRefOf is the card a request's path names: …/{campaignId}/members/{memberId},
// or …/members/{memberId} with no program.
func CardRefOf(c echo.Context) CardRef {
	return CardRef{Project: httpx.ProjectID(c), Campaign: c.Param("campaignId"), Member: c.Param("memberId")}
}

func (h Handler) getMember(c echo.Context) error {
	return httpx.Reply(c)(h.svc.GetMember(c.Request().Context(), CardRefOf(c)))
}

func (h Handler) balance(c echo.Context) error {
	return httpx.WithBody(c, func(r BalanceRequest) (any, error) {
		return h.svc.UpdateBalance(c.Request().Context(), CardRefOf(c), r)
	})
}

func (h Handler) transfer(c echo.Context) error {
	return httpx.WithBody(c, func(r Transfers) (any, error) {
		v, err := h.svc.Transfer(c.Request().Context(), CardRefOf(c), r)
		// This answer's reference schema requires both, where the card's
		// others leave them out: a card without them sends their empty forms.
		if v.ValidityTimeframe == nil {
			v.ValidityTimeframe = map[string]any{}
		}
		if v.ValidityDayOfWeek == nil {
			v.ValidityDayOfWeek = []int{}
		}
		return v, err
	})
}

// ParseTxQuery reads limit (1-100, default 10), order (id or -id), the
// cursor and the filters of a transaction list.
func ParseTxQuery(q url.Values) (TxQuery, error) {
	var tq TxQuery
	var err error
	if tq.Query, err = listq.Parse(q, listq.Spec{}); err != nil {
		return tq, err
	}
	if len(tq.After) > 200 {
		return tq, apierr.InvalidQuery("starting_after_id", "is not a transaction id")
	}
	tq.Filter, err = filters.Parse(q, txFields)
	return tq, err
}

func (h Handler) transactions(c echo.Context) error {
	tq, err := ParseTxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ts, more, next, err := h.svc.ListTransactions(c.Request().Context(), CardRefOf(c), tq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[Transaction]{Data: ts, More: more, Next: next})
}

// parseMemberFilter reads the members list's filters, as the vouchers list
// reads the same ones.
func parseMemberFilter(q url.Values) (MemberFilter, error) {
	f := MemberFilter{Customer: q.Get("customer"), Code: q.Get("code"), IDs: append(q["ids"], q["ids[]"]...)}
	var err error
	if f.CreatedAfter, f.CreatedBefore, err = listq.Between(q, "created_at"); err != nil {
		return f, err
	}
	f.UpdatedAfter, f.UpdatedBefore, err = listq.Between(q, "updated_at")
	return f, err
}
