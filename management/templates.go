package management

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// copyRoute is the copy's route below projectsPrefix, as roleAllows reads
// it: what a project user's role in the destination must allow too.
const copyRoute = "/templates/campaigns/:campaignTemplateId/copy"

// copyTemplate is POST /projects/{id}/templates/campaigns/{templateId}/copy:
// the template, read from its project's cluster, written into the
// destination project's under the name given (and the description, or the
// source's). The two projects may live in different clusters, so the copy
// is two calls, each to the cluster that keeps the project's data; the
// destination answers the new template, or 409 when it has one of that name.
func (h handler) copyTemplate(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var in struct {
		Name                 *string `json:"name"`
		Description          *string `json:"description"`
		DestinationProjectID *string `json:"destination_project_id"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	switch {
	case in.Name == nil || *in.Name == "" || len(*in.Name) > 200:
		return apierr.InvalidPayload("name is required: the template's name in the destination project, 1 to 200 characters")
	case in.DestinationProjectID == nil || *in.DestinationProjectID == "":
		return apierr.InvalidPayload("destination_project_id is required: the project the template is copied to")
	}
	ctx := c.Request().Context()
	dest, err := tenancy.GetProject(ctx, h.pool, *in.DestinationProjectID)
	if err != nil {
		return projectNotFound(err, *in.DestinationProjectID)
	}
	// authorize checked the source project's role; the copy writes into the
	// destination, where a project user's role must allow it as well.
	if id, ok := identity.From(ctx); ok {
		userID, role, err := tenancy.KeyUser(ctx, h.pool, id.KeyID, dest.ID)
		if err != nil && !errors.Is(err, tenancy.ErrKeyNotFound) {
			return err
		}
		if userID != "" && (role == "" || !roleAllows(role, http.MethodPost, copyRoute)) {
			return forbidden("a template is copied only into a project where the user's role may write it (ADMIN); " + dest.ID + " is not one")
		}
	}
	res, err := h.callRegional(c, p.Cluster, http.MethodGet, "/internal/v1/projects/"+url.PathEscape(p.ID)+
		"/templates/campaigns/"+url.PathEscape(c.Param("campaignTemplateId"))+"/export", "", nil)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	res.Body.Close()
	if err != nil {
		return apierr.Unavailable("The cluster " + p.Cluster + " did not send the template; try again shortly.")
	}
	if res.StatusCode != http.StatusOK {
		return c.Blob(res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	var tpl map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tpl); err != nil {
		return err
	}
	tpl["name"], _ = json.Marshal(*in.Name)
	if in.Description != nil {
		tpl["description"], _ = json.Marshal(*in.Description)
	}
	body, err := json.Marshal(tpl)
	if err != nil {
		return err
	}
	res, err = h.callRegional(c, dest.Cluster, http.MethodPost, "/internal/v1/projects/"+url.PathEscape(dest.ID)+
		"/templates/campaigns/import", "", body)
	if err != nil {
		return err
	}
	return relay(c, res)
}
