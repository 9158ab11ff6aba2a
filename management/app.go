package management

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/tenancy"
)

// Config of a management instance.
type Config struct {
	TenancyURL     string
	IdentitySecret []byte
	// OperatorSecret signs management's calls of regional instances'
	// /internal endpoints (regional.Config.OperatorSecret).
	OperatorSecret []byte
	// IdentitySecretPrevious, when set, verifies the router's identities
	// too (it signs nothing): during a rotation management takes the new
	// secret first, with the old one as previous, while the router still
	// signs with the old.
	IdentitySecretPrevious []byte
	Log                    *slog.Logger
	Metrics                *telemetry.Metrics
}

// App is a management instance.
type App struct {
	pool   *db.Pool
	schema *dbschema.Gate // the directory's, against this binary's migrations
	server *db.ServerGate // the directory's server, against db.CheckServer
	echo   *echo.Echo
	signer *identity.Signer
	seen   *identity.Seen
}

// New connects to the tenancy database and wires the management API.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	signer, err := identity.NewSigner(cfg.IdentitySecret, cfg.IdentitySecretPrevious)
	if err != nil {
		return nil, err
	}
	operator, err := identity.NewSigner(cfg.OperatorSecret)
	if err != nil {
		return nil, fmt.Errorf("management: operator secret: %w", err)
	}
	pool, err := db.Open(ctx, cfg.TenancyURL, db.Options{Name: "tally-management"})
	if err != nil {
		return nil, err
	}
	// A CockroachDB Tally does not run on is refused at start, saying what to
	// change; one not reachable yet is checked by Ready.
	server := db.NewServerGate(pool, "the directory (tenancy database)")
	if err := server.Start(ctx, 2*time.Second); err != nil {
		pool.Close()
		return nil, fmt.Errorf("management: %w", err)
	}
	a := &App{pool: pool, schema: tenancy.NewSchemaGate(pool), server: server, signer: signer, seen: identity.NewSeen(100_000)}
	e := httpx.New(httpx.Config{Service: "tally-management", Log: cfg.Log, Metrics: cfg.Metrics, TrustRequestID: true})
	e.Use(a.authenticate) // not on the group: see regional.New
	e.Use(directoryDown)
	e.Use(a.authorize) // after directoryDown: it reads the directory
	g := e.Group("/management/v1")
	h := handler{pool: pool, operator: operator}
	g.POST("/projects", h.createProject)
	g.GET("/projects", h.listProjects)
	g.GET("/projects/:projectId", h.getProject)
	g.PUT("/projects/:projectId", h.updateProject)
	g.DELETE("/projects/:projectId", h.deleteProject)
	g.POST("/projects/:projectId/api-keys", h.createKey)
	g.GET("/projects/:projectId/api-keys", h.listKeys)
	g.DELETE("/projects/:projectId/api-keys/:appId", h.revokeKey)
	g.POST("/projects/:projectId/webhooks", h.createWebhook)
	g.GET("/projects/:projectId/webhooks", h.listWebhooks)
	g.GET("/projects/:projectId/webhooks/:webhookId", h.getWebhook)
	g.PUT("/projects/:projectId/webhooks/:webhookId", h.updateWebhook)
	g.DELETE("/projects/:projectId/webhooks/:webhookId", h.deleteWebhook)
	g.POST("/projects/:projectId/custom-event-schemas", h.createEventSchema)
	g.GET("/projects/:projectId/custom-event-schemas", eventSchemaRoutes.listRoute(h))
	g.GET("/projects/:projectId/custom-event-schemas/:schemaId", eventSchemaRoutes.getRoute(h))
	g.PUT("/projects/:projectId/custom-event-schemas/:schemaId", h.updateEventSchema)
	g.DELETE("/projects/:projectId/custom-event-schemas/:schemaId", eventSchemaRoutes.deleteRoute(h))
	g.POST("/projects/:projectId/metadata-schemas", h.createMetaSchema)
	g.GET("/projects/:projectId/metadata-schemas", metaSchemaRoutes.listRoute(h))
	g.GET("/projects/:projectId/metadata-schemas/:metadataSchemaId", metaSchemaRoutes.getRoute(h))
	g.PUT("/projects/:projectId/metadata-schemas/:metadataSchemaId", h.updateMetaSchema)
	g.DELETE("/projects/:projectId/metadata-schemas/:metadataSchemaId", metaSchemaRoutes.deleteRoute(h))
	g.GET("/projects/:projectId/stacking-rules", h.listStackingRules)
	g.POST("/projects/:projectId/stacking-rules", h.createStackingRules)
	g.GET("/projects/:projectId/stacking-rules/:rulesId", h.getStackingRules)
	g.PUT("/projects/:projectId/stacking-rules/:rulesId", h.updateStackingRules)
	g.DELETE("/projects/:projectId/stacking-rules/:rulesId", h.deleteStackingRules)
	g.POST("/projects/:projectId/webhook-secret/rotate", h.rotateWebhookSecret)
	g.GET("/projects/:projectId/webhooks/:webhookId/deliveries", h.listDeliveries)
	g.GET("/projects/:projectId/usage", h.usage)
	g.GET("/projects/:projectId/templates/campaigns", h.listTemplates)
	g.POST("/projects/:projectId/templates/campaigns/:campaignTemplateId/copy", h.copyTemplate)
	g.POST("/projects/users/invite", h.inviteUser)
	g.POST("/projects/:projectId/users", h.assignUser)
	g.GET("/projects/:projectId/users", h.listUsers)
	g.GET("/projects/:projectId/users/:userId", h.getUser)
	g.PUT("/projects/:projectId/users/:userId", h.updateUser)
	g.DELETE("/projects/:projectId/users/:userId", h.unassignUser)
	g.POST("/users/:userId/credentials", h.issueCredential)
	g.GET("/projects/:projectId/branding", h.listBranding)
	g.POST("/projects/:projectId/branding", h.createBranding)
	g.GET("/projects/:projectId/branding/:brandingId", h.getBranding)
	g.PUT("/projects/:projectId/branding/:brandingId", h.updateBranding)
	g.DELETE("/projects/:projectId/branding/:brandingId", h.deleteBranding)
	g.GET("/clusters/:name/outbox/parked", h.parked)
	g.POST("/clusters/:name/outbox/:projectId/:taskId/requeue", h.requeue)
	g.PUT("/projects/:projectId/api-version", h.setAPIVersion)
	g.GET("/api-versions", h.listAPIVersions)
	g.GET("/plans", h.listPlans)
	g.PUT("/plans/:name", h.putPlan)
	g.GET("/clusters", h.listClusters)
	g.GET("/clusters/:name", h.getCluster)
	g.PUT("/clusters/:name", h.putCluster)
	a.echo = e
	return a, nil
}

func (a *App) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := a.signer.VerifyRequest(c.Request(), identity.AudienceManagement, "", time.Now(), a.seen)
		if err != nil || id.Kind != identity.KindManagement {
			return apierr.Unauthorized("Send valid X-Management-Id and X-Management-Token headers through the platform's router.")
		}
		r := c.Request()
		c.SetRequest(r.WithContext(identity.With(r.Context(), id)))
		return next(c)
	}
}

// directoryDown answers an outage of management's one database as what it
// is, the directory (the tenancy database), rather than as apierr.From's
// "database of this cluster" of a regional instance: still 503 with
// Retry-After, since the request may succeed once the directory is back.
func directoryDown(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		var ae *apierr.Error
		if err == nil || errors.As(err, &ae) || !errors.Is(db.Classify(err), db.ErrUnavailable) {
			return err
		}
		u := apierr.Unavailable("The platform directory (the tenancy database) cannot be reached; try again shortly.")
		u.Cause = err
		return u
	}
}

// Handler serves the management API.
func (a *App) Handler() http.Handler { return a.echo }

// Ready reports whether the tenancy database answers, with a schema as new
// as this binary needs. The manifests migrate it in management's init
// container, but `tally management` does not migrate before it serves.
func (a *App) Ready(ctx context.Context) error {
	if err := a.pool.Ping(ctx); err != nil {
		return errors.Join(db.ErrUnavailable, err)
	}
	if err := a.server.Check(ctx); err != nil {
		return err
	}
	if err := a.schema.Check(ctx); err != nil {
		if errors.Is(err, dbschema.ErrBehind) {
			return err
		}
		return fmt.Errorf("the directory (tenancy database): %w", db.Classify(err))
	}
	return nil
}

// Close releases the pool.
func (a *App) Close() { a.pool.Close() }
