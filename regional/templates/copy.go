package templates

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"

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
// campaign made from it needs in the destination, but for the project's
// objects its rules and settings name, which it carries (carry.go).

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
	// Carried are the source project's objects the template names.
	Carried []Carried `json:"carried"`
}

// Export reads a template for a copy.
func (s *Service) Export(ctx context.Context, projectID, id string) (Copy, error) {
	t, err := get(ctx, s.pool, projectID, id)
	if err != nil {
		return Copy{}, err
	}
	// A template copied in carries what it was copied with: its ids are of
	// a project this one does not read.
	carried := t.Carried
	if carried == nil {
		if carried, err = s.carry(ctx, projectID, docsOf(t.Body, t.Rules)); err != nil {
			return Copy{}, err
		}
	}
	return Copy{Name: t.Name, Description: t.Description, CampaignType: t.CampaignType, Source: t.Source, Body: t.Body,
		Rules: t.Rules, SourceProject: projectID, Carried: carried}, nil
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
	t := Template{ID: ids.New("camp_tpl_"), Name: c.Name, Description: c.Description, CampaignType: c.CampaignType,
		Source: c.Source, Body: c.Body, Rules: c.Rules, CreatedAt: s.now()}
	// Within its project a copy names the project's own objects.
	if c.SourceProject != "" && c.SourceProject != projectID {
		if err := checkCarried(c.Carried, c.SourceProject, projectID); err != nil {
			return View{}, err
		}
		t.Carried = c.Carried
	}
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
// them, and a copy carries each (carry.go).
var projectObject = regexp.MustCompile(`^(prod|sku|pc|seg|loc)_[0-9a-f]{16,}$`)
