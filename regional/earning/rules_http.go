package earning

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
)

// The HTTP handlers of earning rules (/v1/loyalties/{campaignId}/earning-rules).

func registerRules(g *echo.Group, h handler) {
	g.POST("/loyalties/:campaignId/earning-rules", h.createRules)
	g.GET("/loyalties/:campaignId/earning-rules", h.listRules)
	g.GET("/loyalties/:campaignId/earning-rules/:ruleId", h.getRule)
	g.PUT("/loyalties/:campaignId/earning-rules/:ruleId", h.updateRule)
	g.DELETE("/loyalties/:campaignId/earning-rules/:ruleId", h.deleteRule)
	g.POST("/loyalties/:campaignId/earning-rules/:ruleId/enable", h.toggleRule(true))
	g.POST("/loyalties/:campaignId/earning-rules/:ruleId/disable", h.toggleRule(false))
}

func (h handler) createRules(c echo.Context) error {
	return httpx.WithBody(c, func(qs []RuleRequest) (any, error) {
		return h.svc.CreateRules(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), qs)
	})
}

func (h handler) listRules(c echo.Context) error {
	spec := listq.Spec{Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"}, Pages: true, NoCursor: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		vs, total, err := h.svc.ListRules(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), lq)
		// Numbered pages only (no cursor): more follow this page's rows.
		return listq.List[RuleView]{Data: vs, Total: &total, More: total > lq.Offset()+len(vs)}, err
	})
}

func (h handler) getRule(c echo.Context) error {
	return httpx.Reply(c)(h.svc.GetRule(c.Request().Context(), campaigns.ItemRefOf(c, "ruleId")))
}

func (h handler) updateRule(c echo.Context) error {
	return httpx.WithBody(c, func(q RuleRequest) (any, error) {
		return h.svc.UpdateRule(c.Request().Context(), campaigns.ItemRefOf(c, "ruleId"), q)
	})
}

func (h handler) deleteRule(c echo.Context) error {
	if err := h.svc.DeleteRule(c.Request().Context(), campaigns.ItemRefOf(c, "ruleId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h handler) toggleRule(active bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		v, err := h.svc.UpdateRule(c.Request().Context(), campaigns.ItemRefOf(c, "ruleId"),
			RuleRequest{Active: &active})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	}
}
