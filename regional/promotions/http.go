package promotions

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
)

// Register mounts the promotion endpoints on the /v1 group.
func Register(g *echo.Group, s *Service) {
	g.GET("/promotions/tiers", s.listTiers)
	g.GET("/promotions/:campaignId/tiers", s.listTiers)
	g.POST("/promotions/:campaignId/tiers", httpx.Update("campaignId", s.AddTier))
	g.GET("/promotions/tiers/:tierId", httpx.Read("tierId", s.GetTier))
	g.PUT("/promotions/tiers/:tierId", httpx.Update("tierId", s.UpdateTier))
	g.DELETE("/promotions/tiers/:tierId", httpx.Delete("tierId", s.DeleteTier))
	for path, active := range map[string]bool{"enable": true, "disable": false} {
		g.POST("/promotions/tiers/:tierId/"+path, func(c echo.Context) error {
			return httpx.Reply(c)(s.UpdateTier(c.Request().Context(), httpx.ProjectID(c), c.Param("tierId"), TierRequest{Active: &active}))
		})
	}
	g.GET("/promotions/stacks", s.listStacks)
	g.GET("/promotions/:campaignId/stacks", s.listStacks)
	g.POST("/promotions/:campaignId/stacks", func(c echo.Context) error {
		return httpx.WithBody(c, func(r StackRequest) (any, error) {
			return s.writeStack(c.Request().Context(), campaigns.ItemRefOf(c, ""), r)
		})
	})
	g.GET("/promotions/:campaignId/stacks/:stackId", func(c echo.Context) error {
		return httpx.Reply(c)(s.getStack(c.Request().Context(), campaigns.ItemRefOf(c, "stackId")))
	})
	g.PUT("/promotions/:campaignId/stacks/:stackId", func(c echo.Context) error {
		return httpx.WithBody(c, func(r StackRequest) (any, error) {
			return s.writeStack(c.Request().Context(), campaigns.ItemRefOf(c, "stackId"), r)
		})
	})
	g.DELETE("/promotions/:campaignId/stacks/:stackId", func(c echo.Context) error {
		if err := s.deleteStack(c.Request().Context(), campaigns.ItemRefOf(c, "stackId")); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
}

func (s *Service) listTiers(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{DefaultLimit: 10, Orders: []string{"hierarchy", "-hierarchy"}, Pages: true})
	if err != nil {
		return err
	}
	var avail *bool
	switch q.Get("is_available") {
	case "":
	case "true", "false":
		v := q.Get("is_available") == "true"
		avail = &v
	default:
		return apierr.InvalidQuery("is_available", "must be true or false")
	}
	vs, total, more, next, err := s.ListTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), avail, lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[TierView]{DataRef: "tiers", Data: vs, Total: &total, More: more, Next: next})
}

// listStacks pages as the reference does (limit, page, order, created_at
// and updated_at bounds); without limit, up to 100 (a page held them all
// before it paged).
func (s *Service) listStacks(c echo.Context) error {
	spec := listq.Spec{DefaultLimit: 100, Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at", "name", "-name"}, Pages: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		var f StackFilter
		var err error
		if f.CreatedAfter, f.CreatedBefore, err = listq.Between(c.QueryParams(), "created_at"); err != nil {
			return nil, err
		}
		if f.UpdatedAfter, f.UpdatedBefore, err = listq.Between(c.QueryParams(), "updated_at"); err != nil {
			return nil, err
		}
		vs, total, more, next, err := s.ListStacks(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), f, lq)
		return listq.List[map[string]any]{DataRef: "data", Data: vs, Total: &total, More: more, Next: next}, err
	})
}
