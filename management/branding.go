package management

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/tenancy"
)

// Branding: one a project, the reference's ManagementProjectsBranding.
// Voucherify prints it in the footer of its own e-mails; Tally sends no
// e-mail, so it is stored and served back for the platform's own
// front-ends and mailers to read (README).

// brandingFields are the sections and the texts each holds.
var brandingFields = map[string][]string{
	"brand":   {"name", "privacy_policy_url", "terms_of_use_url", "permission_reminder", "website_url"},
	"address": {"street", "city", "postal", "state", "country"},
	"contact": {"email", "phone"},
}

var brandingURLs = []string{"privacy_policy_url", "terms_of_use_url", "website_url"}

type brandingView struct {
	ID        string             `json:"id"`
	Brand     map[string]*string `json:"brand"`
	Address   map[string]*string `json:"address"`
	Contact   map[string]*string `json:"contact"`
	CreatedAt jsonx.Time         `json:"created_at"`
	UpdatedAt *jsonx.Time        `json:"updated_at"`
	Object    string             `json:"object"`
}

func viewBranding(b tenancy.Branding) brandingView {
	section := func(name string) map[string]*string {
		out := map[string]*string{}
		for _, k := range brandingFields[name] {
			out[k] = b.Doc[name][k]
		}
		return out
	}
	return brandingView{ID: b.ID, Brand: section("brand"), Address: section("address"), Contact: section("contact"),
		CreatedAt: jsonx.Time{Time: b.CreatedAt}, UpdatedAt: jsonx.Ptr(b.UpdatedAt), Object: "brand"}
}

// applyBranding writes what the body sends over doc: a text replaces the
// one held, null clears it, what is not sent stays (the partial PUT).
func applyBranding(doc map[string]map[string]*string, raw json.RawMessage) error {
	var in map[string]map[string]*string
	if err := json.Unmarshal(raw, &in); err != nil {
		return apierr.InvalidPayload("the branding is an object of brand, address and contact, each of texts: " + err.Error())
	}
	for section, fields := range in {
		known, ok := brandingFields[section]
		if !ok {
			return apierr.InvalidPayload(section + " is not a part of a branding: brand, address or contact")
		}
		if doc[section] == nil {
			doc[section] = map[string]*string{}
		}
		for k, v := range fields {
			if !slices.Contains(known, k) {
				return apierr.InvalidPayload(section + "." + k + " is not a field of the branding's " + section)
			}
			if v != nil && slices.Contains(brandingURLs, k) {
				if u, err := url.Parse(*v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return apierr.InvalidPayload(section + "." + k + " must be an http or https URL")
				}
			}
			if v != nil && k == "email" {
				if a, err := mail.ParseAddress(*v); err != nil || a.Address != *v {
					return apierr.InvalidPayload(section + ".email must be an e-mail address")
				}
			}
			doc[section][k] = v
		}
	}
	return nil
}

func brandingNotFound(err error, id string) error {
	if errors.Is(err, tenancy.ErrBrandingNotFound) {
		return apierr.NotFound("branding", id)
	}
	return err
}

func (h handler) listBranding(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var bs []tenancy.Branding
	b, err := tenancy.GetBranding(c.Request().Context(), h.pool, p.ID)
	if err == nil {
		bs = append(bs, b)
	} else if !errors.Is(err, tenancy.ErrBrandingNotFound) {
		return err
	}
	return c.JSON(http.StatusOK, listq.All(bs, viewBranding))
}

func (h handler) createBranding(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return err
	}
	b := tenancy.Branding{ID: ids.New("brd_"), Doc: map[string]map[string]*string{}, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if err := applyBranding(b.Doc, raw); err != nil {
		return err
	}
	err = tenancy.PutBranding(c.Request().Context(), h.pool, p.ID, b, true)
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("branding", "the project "+p.ID+" has its branding already: change it with PUT …/branding/{id}")
	} else if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewBranding(b))
}

// projectBranding reads the project's branding, which must be the one named.
func (h handler) projectBranding(c echo.Context, q db.Querier, projectID string) (tenancy.Branding, error) {
	id := c.Param("brandingId")
	b, err := tenancy.GetBranding(c.Request().Context(), q, projectID)
	if err == nil && b.ID != id {
		err = tenancy.ErrBrandingNotFound
	}
	return b, brandingNotFound(err, id)
}

func (h handler) getBranding(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	b, err := h.projectBranding(c, h.pool, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewBranding(b))
}

func (h handler) updateBranding(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out tenancy.Branding
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		b, err := h.projectBranding(c, tx, p.ID)
		if err != nil {
			return err
		}
		if b.Doc == nil {
			b.Doc = map[string]map[string]*string{}
		}
		if err := applyBranding(b.Doc, raw); err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		b.UpdatedAt = &now
		out = b
		return tenancy.PutBranding(ctx, tx, p.ID, b, false)
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewBranding(out))
}

func (h handler) deleteBranding(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	id := c.Param("brandingId")
	if err := tenancy.DeleteBranding(c.Request().Context(), h.pool, p.ID, id); err != nil {
		return brandingNotFound(err, id)
	}
	return c.NoContent(http.StatusNoContent)
}
