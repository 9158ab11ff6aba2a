package management

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/tenancy"
)

// webhookView is the reference's ManagementProjectsWebhook.
type webhookView struct {
	ID        string      `json:"id"`
	Object    string      `json:"object"`
	CreatedAt jsonx.Time  `json:"created_at"`
	UpdatedAt *jsonx.Time `json:"updated_at"`
	TargetURL string      `json:"target_url"`
	Events    []string    `json:"events"`
	Active    bool        `json:"active"`
}

func viewWebhook(w tenancy.Webhook) webhookView {
	return webhookView{ID: w.ID, Object: "webhook", CreatedAt: jsonx.Time{Time: w.CreatedAt}, UpdatedAt: jsonx.Ptr(w.UpdatedAt),
		TargetURL: w.TargetURL, Events: w.Events, Active: w.Active}
}

type webhookInput struct {
	TargetURL *string   `json:"target_url"`
	Events    *[]string `json:"events"`
	Active    *bool     `json:"active"`
}

var eventNameRe = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*)$`)

func (in webhookInput) apply(w *tenancy.Webhook) error {
	if in.TargetURL != nil {
		u, err := url.Parse(*in.TargetURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(*in.TargetURL) > 2000 {
			return apierr.InvalidPayload(fmt.Sprintf("Property target_url must be an http or https URL, got %q.", *in.TargetURL))
		}
		w.TargetURL = *in.TargetURL
	}
	if in.Events != nil {
		if len(*in.Events) == 0 {
			return apierr.InvalidPayload("Property events must name at least one event, such as customer.created.")
		}
		for _, e := range *in.Events {
			if !eventNameRe.MatchString(e) || len(e) > 200 {
				return apierr.InvalidPayload(fmt.Sprintf("Property events holds %q, which is not an event name such as customer.created.", e))
			}
		}
		w.Events = *in.Events
	}
	if in.Active != nil {
		w.Active = *in.Active
	}
	return nil
}

// webhookProject checks the project exists and its plan has webhooks: 404,
// then 402 missing_required_feature.
func (h handler) webhookProject(c echo.Context) (tenancy.Project, error) {
	id := c.Param("projectId")
	ctx := c.Request().Context()
	p, err := tenancy.GetProject(ctx, h.pool, id)
	if err != nil {
		return p, projectNotFound(err, id)
	}
	plan, err := tenancy.GetPlan(ctx, h.pool, p.Plan)
	if err != nil && !errors.Is(err, tenancy.ErrPlanNotFound) {
		return p, err
	}
	if !plan.Has(tenancy.FeatureWebhooks) {
		return p, &apierr.Error{Status: http.StatusPaymentRequired, Key: "missing_required_feature", Message: "Payment required",
			Details: fmt.Sprintf("The plan %q of project %s does not include the feature %q; change the project's plan to use it.",
				p.Plan, p.ID, tenancy.FeatureWebhooks)}
	}
	return p, nil
}

func webhookNotFound(err error, id string) error {
	if errors.Is(err, tenancy.ErrWebhookNotFound) {
		return apierr.NotFound("webhook", id)
	}
	return err
}

func (h handler) createWebhook(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	var in webhookInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if in.TargetURL == nil || in.Events == nil {
		return apierr.InvalidPayload("Properties target_url and events are required.")
	}
	w := tenancy.Webhook{ProjectID: p.ID, Active: true}
	if err := in.apply(&w); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.CreateWebhook(ctx, tx, &w) }); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewWebhook(w))
}

func (h handler) listWebhooks(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	ws, err := tenancy.ListWebhooks(c.Request().Context(), h.pool, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.All(ws, viewWebhook))
}

func (h handler) getWebhook(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	w, err := tenancy.GetWebhook(c.Request().Context(), h.pool, p.ID, c.Param("webhookId"))
	if err != nil {
		return webhookNotFound(err, c.Param("webhookId"))
	}
	return c.JSON(http.StatusOK, viewWebhook(w))
}

func (h handler) updateWebhook(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	var in webhookInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var w tenancy.Webhook
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if w, err = tenancy.GetWebhook(ctx, tx, p.ID, c.Param("webhookId")); err != nil {
			return err
		}
		if err := in.apply(&w); err != nil {
			return err
		}
		return tenancy.UpdateWebhook(ctx, tx, &w)
	})
	if err != nil {
		return webhookNotFound(err, c.Param("webhookId"))
	}
	return c.JSON(http.StatusOK, viewWebhook(w))
}

func (h handler) deleteWebhook(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.DeleteWebhook(ctx, tx, p.ID, c.Param("webhookId")) })
	if err != nil {
		return webhookNotFound(err, c.Param("webhookId"))
	}
	return c.NoContent(http.StatusNoContent)
}

type secretView struct {
	WebhookToken string `json:"webhook_token"`
	Object       string `json:"object"`
}

func (h handler) rotateWebhookSecret(c echo.Context) error {
	id := c.Param("projectId")
	ctx := c.Request().Context()
	var p tenancy.Project
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		p, err = tenancy.RotateWebhookSecret(ctx, tx, id)
		return err
	})
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.JSON(http.StatusOK, secretView{WebhookToken: p.WebhookSecret, Object: "webhook_secret"})
}

func (h handler) listPlans(c echo.Context) error {
	plans, err := tenancy.ListPlans(c.Request().Context(), h.pool)
	if err != nil {
		return err
	}
	total := len(plans)
	return c.JSON(http.StatusOK, listq.List[tenancy.Plan]{Data: plans, Total: &total})
}

var planNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func (h handler) putPlan(c echo.Context) error {
	name := c.Param("name")
	if !planNameRe.MatchString(name) {
		return apierr.InvalidPayload("A plan name is lower-case letters, digits, '-' and '_'.")
	}
	var in struct {
		Features          []string `json:"features"`
		RequestsPerMinute *int64   `json:"requests_per_minute"`
		RequestsPerHour   *int64   `json:"requests_per_hour"`
		ClusterShare      *float64 `json:"cluster_share"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	p := tenancy.Plan{Name: name, Features: in.Features}
	if s := in.ClusterShare; s != nil {
		if !(*s > 0 && *s <= 1) {
			return apierr.InvalidPayload("Property cluster_share is the share of a regional instance's database connections one project may hold: more than 0, at most 1.")
		}
		p.ClusterShare = *s
	}
	for _, l := range []struct {
		name string
		in   *int64
		out  *int64
	}{{"requests_per_minute", in.RequestsPerMinute, &p.RequestsPerMinute}, {"requests_per_hour", in.RequestsPerHour, &p.RequestsPerHour}} {
		if l.in == nil {
			continue // unlimited
		}
		if *l.in < 0 || *l.in > 1_000_000_000 {
			return apierr.InvalidPayload("Property " + l.name + " is 0 (unlimited) to 1000000000 requests.")
		}
		*l.out = *l.in
	}
	ctx := c.Request().Context()
	if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.PutPlan(ctx, tx, p) }); err != nil {
		return err
	}
	p.ClusterShare = p.Share() // as it reads back
	return c.JSON(http.StatusOK, p)
}
