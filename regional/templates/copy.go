package templates

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
)

// The management API's copy of a template to another project
// (POST /management/v1/projects/{id}/templates/campaigns/{templateId}/copy)
// reads the template from its project's cluster and writes it into the
// destination's, which may be another cluster: tenant data crosses regions
// only at an operator's request, and only as the template itself. A
// template is self-contained (its settings and copies of its validation
// rules as they were when saved), so the copy carries everything a
// campaign made from it needs in the destination.

// Copy is a template as it travels between projects.
type Copy struct {
	Name         string                       `json:"name"`
	Description  *string                      `json:"description"`
	CampaignType string                       `json:"campaign_type"`
	Source       string                       `json:"source"`
	Body         map[string]json.RawMessage   `json:"body"`
	Rules        []map[string]json.RawMessage `json:"rules"`
	// SourceProject is the project the template was read from (Export).
	SourceProject string `json:"source_project_id"`
}

// Export reads a template for a copy.
func (s *Service) Export(ctx context.Context, projectID, id string) (Copy, error) {
	t, err := get(ctx, s.pool, projectID, id)
	return Copy{Name: t.Name, Description: t.Description, CampaignType: t.CampaignType, Source: t.Source, Body: t.Body,
		Rules: t.Rules, SourceProject: projectID}, err
}

// Import writes a copied template into projectID under a new id: 409 when
// the project has a template of its name.
func (s *Service) Import(ctx context.Context, projectID string, c Copy) (View, error) {
	if err := checkName(&c.Name, true); err != nil {
		return View{}, err
	}
	if !slices.Contains(templateTypes, c.CampaignType) || (c.Source != fromCampaign && c.Source != fromTier) || c.Body == nil {
		return View{}, apierr.InvalidPayload("the copy is not a template's export: campaign_type, source and body are required")
	}
	if c.Rules == nil {
		c.Rules = []map[string]json.RawMessage{}
	}
	if err := c.checkPortable(projectID); err != nil {
		return View{}, err
	}
	t := Template{ID: ids.New("camp_tpl_"), Name: c.Name, Description: c.Description, CampaignType: c.CampaignType,
		Source: c.Source, Body: c.Body, Rules: c.Rules, CreatedAt: s.now()}
	return t.View(), db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return insert(ctx, tx, projectID, t) })
}

func (h handler) export(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Export(c.Request().Context(), c.Param("projectId"), c.Param("campaignTemplateId")))
}

func (h handler) importCopy(c echo.Context) error {
	return httpx.WithBody(c, func(r Copy) (any, error) {
		return h.svc.Import(c.Request().Context(), c.Param("projectId"), r)
	})
}

// projectObject is the id of an object of one project that a validation
// rule or a discount may name: a product, SKU, product collection, segment
// or location. Ids are made per object, so another project has none of
// them.
var projectObject = regexp.MustCompile(`^(prod|sku|pc|seg|loc)_[0-9a-f]{16,}$`)

// checkPortable refuses a copy into another project than its source whose
// rules or settings name the source's products, SKUs, collections,
// segments or locations: the reference creates them in the destination on
// first use, which Tally does not yet, and a rule naming what its project
// lacks would never match there, silently. The 400 names each.
func (c Copy) checkPortable(projectID string) error {
	if c.SourceProject == "" || c.SourceProject == projectID {
		return nil
	}
	seen := map[string]bool{}
	var named []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if projectObject.MatchString(x) && !seen[x] {
				seen[x] = true
				named = append(named, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, doc := range append([]map[string]json.RawMessage{c.Body}, c.Rules...) {
		for _, raw := range doc {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				walk(v)
			}
		}
	}
	if len(named) == 0 {
		return nil
	}
	slices.Sort(named)
	return apierr.InvalidPayload(fmt.Sprintf("the template's validation rules or settings name objects of project %s that project %s does not have: %s. "+
		"Tally does not create them in the destination: copy the template within its project, or save it from a campaign whose rules name none of them",
		c.SourceProject, projectID, strings.Join(named, ", ")))
}
