package templates

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

type handler struct{ svc *Service }

// Register mounts /v1/templates/campaigns on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.GET("/templates/campaigns", h.list)
	g.POST("/templates/campaigns", httpx.Create(svc.Create))
	g.GET("/templates/campaigns/:campaignTemplateId", httpx.Read("campaignTemplateId", svc.Get))
	g.PUT("/templates/campaigns/:campaignTemplateId", httpx.Update("campaignTemplateId", svc.Update))
	g.DELETE("/templates/campaigns/:campaignTemplateId", httpx.Delete("campaignTemplateId", svc.Delete))
	g.POST("/templates/campaigns/:campaignTemplateId/campaign-setup", h.campaignSetup)
	g.POST("/templates/campaigns/:campaignTemplateId/tier-setup", h.tierSetup)
}

// listSpec: the reference pages templates by starting_after_id, ordered
// by id.
var listSpec = listq.Spec{}

// listFields are the reference's template filters (ParameterFiltersListTemplates).
var listFields = map[string]filters.Field{
	"id":            {Kind: filters.String, Column: "id"},
	"name":          {Kind: filters.String, Column: "name"},
	"campaign_type": {Kind: filters.String, Column: "campaign_type"},
}

// RegisterInternal mounts on g, the /internal/v1 group, the management
// API's list of a project's templates (GET
// /management/v1/projects/{id}/templates/campaigns: the same list, for the
// project in the path), and the two halves of its copy: a template's
// export from its project and its import into the destination (copy.go).
func RegisterInternal(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.GET("/projects/:projectId/templates/campaigns", func(c echo.Context) error { return h.listOf(c, c.Param("projectId")) })
	g.GET("/projects/:projectId/templates/campaigns/:campaignTemplateId/export", h.export)
	g.POST("/projects/:projectId/templates/campaigns/import", h.importCopy)
}

func (h handler) list(c echo.Context) error { return h.listOf(c, httpx.ProjectID(c)) }

func (h handler) listOf(c echo.Context, projectID string) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listSpec)
	if err != nil {
		return err
	}
	f, err := filters.Parse(q, listFields)
	if err != nil {
		return err
	}
	withTotal := false
	if s := q.Get("include_total"); s != "" {
		if withTotal, err = strconv.ParseBool(s); err != nil {
			return apierr.InvalidQuery("include_total", "must be true or false, got "+strconv.Quote(s))
		}
	}
	out, err := h.svc.List(c.Request().Context(), projectID, lq, f, withTotal)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (h handler) campaignSetup(c echo.Context) error {
	return httpx.WithBody(c, func(r map[string]json.RawMessage) (any, error) {
		return h.svc.CampaignSetup(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignTemplateId"), r)
	})
}

func (h handler) tierSetup(c echo.Context) error {
	return httpx.WithBody(c, func(r map[string]json.RawMessage) (any, error) {
		return h.svc.TierSetup(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignTemplateId"), r)
	})
}
