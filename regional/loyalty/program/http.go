package program

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

// handler serves /v1/loyalties: the programs (progs) and their cards and
// ledger (cards).
type handler struct {
	progs *Service
	cards *loyalty.Service
}

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{progs: svc, cards: svc.cards}
	g.POST("/loyalties", httpx.Create(svc.CreateCampaign))
	g.GET("/loyalties", h.listCampaigns)
	g.GET("/loyalties/:campaignId", httpx.Read("campaignId", svc.GetCampaign))
	g.PUT("/loyalties/:campaignId", httpx.Update("campaignId", svc.UpdateCampaign))
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
	g.GET("/loyalties/:campaignId/members/:memberId/points-expiration", h.pointsExpiration)
}

func (h handler) deleteCampaign(c echo.Context) error {
	id, err := h.progs.DeleteCampaign(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"async_action_id": id})
}

// cardListSpec is the paging of the campaign and member lists, ordered by
// creation, which is id order: by number as their reference pages them, and
// by the cursor.
var cardListSpec = listq.Spec{Orders: []string{"created_at", "-created_at", "id", "-id"}, Pages: true}

func (h handler) listCampaigns(c echo.Context) error {
	return httpx.WithList(c, cardListSpec, func(lq listq.Query) (any, error) {
		cs, total, more, next, err := h.progs.ListCampaigns(c.Request().Context(), httpx.ProjectID(c), lq)
		return listq.List[loyalty.CampaignView]{DataRef: "campaigns", Data: cs, Total: &total, More: more, Next: next}, err
	})
}

func (h handler) addMember(c echo.Context) error {
	return httpx.WithBody(c, func(r MemberRequest) (any, error) {
		return h.progs.AddMember(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), r)
	})
}

func (h handler) listMembers(c echo.Context) error {
	return httpx.WithList(c, cardListSpec, func(lq listq.Query) (any, error) {
		f, err := parseMemberFilter(c.QueryParams())
		if err != nil {
			return nil, err
		}
		cs, total, more, next, err := h.cards.ListMembers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), f, lq)
		return listq.List[loyalty.CardView]{DataRef: "vouchers", Data: cs, Total: &total, More: more, Next: next}, err
	})
}

func (h handler) getMember(c echo.Context) error {
	return httpx.Reply(c)(h.cards.GetMember(c.Request().Context(), loyalty.CardRefOf(c)))
}

func (h handler) balance(c echo.Context) error {
	return httpx.WithBody(c, func(r loyalty.BalanceRequest) (any, error) {
		return h.cards.UpdateBalance(c.Request().Context(), loyalty.CardRefOf(c), r)
	})
}

func (h handler) transfer(c echo.Context) error {
	return httpx.WithBody(c, func(r loyalty.Transfers) (any, error) {
		v, err := h.cards.Transfer(c.Request().Context(), loyalty.CardRefOf(c), r)
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

func (h handler) transactions(c echo.Context) error {
	tq, err := loyalty.ParseTxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ts, more, next, err := h.cards.ListTransactions(c.Request().Context(), loyalty.CardRefOf(c), tq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[loyalty.Transaction]{Data: ts, More: more, Next: next})
}

// parseMemberFilter reads the members list's filters, as the vouchers list
// reads the same ones.
func parseMemberFilter(q url.Values) (loyalty.MemberFilter, error) {
	f := loyalty.MemberFilter{Customer: q.Get("customer"), Code: q.Get("code"), IDs: append(q["ids"], q["ids[]"]...)}
	var err error
	if f.CreatedAfter, f.CreatedBefore, err = listq.Between(q, "created_at"); err != nil {
		return f, err
	}
	f.UpdatedAfter, f.UpdatedBefore, err = listq.Between(q, "updated_at")
	return f, err
}

func (h handler) pointsExpiration(c echo.Context) error {
	// A card has one bucket per date, in date order: numbered pages only,
	// no cursor.
	lq, err := listq.Parse(c.QueryParams(), listq.Spec{NoOrder: true, Pages: true, NoCursor: true})
	if err != nil {
		return err
	}
	bs, total, err := h.cards.PointsExpiration(c.Request().Context(), loyalty.CardRefOf(c), lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[loyalty.PointsBucket]{Data: bs, Total: &total, More: total > lq.Offset()+len(bs)})
}
