package management

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/tenancy"
)

type handler struct {
	pool     *db.Pool
	operator *identity.Signer // signs its calls of regional's /internal endpoints
}

// projectInput is a create or update request; nil means "not given".
type projectInput struct {
	Name                                  *string          `json:"name"`
	Description                           *string          `json:"description"`
	ClusterID                             *string          `json:"cluster_id"`
	Cluster                               *string          `json:"cluster"`
	Timezone                              *string          `json:"timezone"`
	Currency                              *string          `json:"currency"`
	DialCode                              *string          `json:"dial_code"`
	WebhookVersion                        *string          `json:"webhook_version"`
	APIVersion                            *string          `json:"api_version"`
	Plan                                  *string          `json:"plan"`
	CaseSensitiveCodes                    *bool            `json:"case_sensitive_codes"`
	IsSandbox                             *bool            `json:"is_sandbox"`
	ClientTrustedDomains                  *[]string        `json:"client_trusted_domains"`
	ClientRedeemEnabled                   *bool            `json:"client_redeem_enabled"`
	ClientPublishEnabled                  *bool            `json:"client_publish_enabled"`
	ClientListVouchersEnabled             *bool            `json:"client_list_vouchers_enabled"`
	ClientCreateCustomerEnabled           *bool            `json:"client_create_customer_enabled"`
	ClientLoyaltyEventsEnabled            *bool            `json:"client_loyalty_events_enabled"`
	ClientSetVoucherExpirationDateEnabled *bool            `json:"client_set_voucher_expiration_date_enabled"`
	ClientIPRateLimit                     *tenancy.IPLimit `json:"client_ip_rate_limit"`
}

var currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)

func (in projectInput) apply(p *tenancy.Project) error {
	if in.Name != nil {
		name := strings.TrimSpace(*in.Name)
		if name == "" || len(name) > 200 {
			return apierr.InvalidPayload("Property name must be 1 to 200 characters.")
		}
		p.Name = name
	}
	if in.Description != nil {
		p.Description = in.Description
	}
	s := &p.Settings
	if in.Timezone != nil {
		s.Timezone = *in.Timezone
	}
	if in.Currency != nil {
		if !currencyRe.MatchString(*in.Currency) {
			return apierr.InvalidPayload(fmt.Sprintf("Property currency must be a 3-letter ISO 4217 code such as EUR, got %q.", *in.Currency))
		}
		s.Currency = *in.Currency
	}
	if in.DialCode != nil {
		s.DialCode = in.DialCode
	}
	if in.WebhookVersion != nil {
		if !apiversion.KnownWebhook(*in.WebhookVersion) {
			return apiversion.InvalidWebhook("Property webhook_version", *in.WebhookVersion)
		}
		s.WebhookVersion = *in.WebhookVersion
	}
	if in.APIVersion != nil {
		if !apiversion.Known(*in.APIVersion) {
			return apiversion.Invalid("Property api_version", *in.APIVersion)
		}
		p.APIVersion = *in.APIVersion
	}
	if in.Plan != nil {
		p.Plan = *in.Plan
	}
	if l := in.ClientIPRateLimit; l != nil {
		if l.Requests < 1 || l.Requests > 100_000 || l.Seconds < 1 || l.Seconds > 86_400 {
			return apierr.InvalidPayload("Property client_ip_rate_limit is {requests: 1 to 100000, seconds: 1 to 86400}: " +
				"the requests one client address may make in so many seconds on the client-side API.")
		}
		s.ClientIPLimit = l
	}
	if in.ClientTrustedDomains != nil {
		if len(*in.ClientTrustedDomains) > 100 {
			return apierr.InvalidPayload("Property client_trusted_domains holds at most 100 entries.")
		}
		for _, d := range *in.ClientTrustedDomains {
			if err := tenancy.CheckTrustedDomain(d); err != nil {
				return apierr.InvalidPayload("Property client_trusted_domains: " + err.Error() + ".")
			}
		}
		s.ClientTrustedDomains = *in.ClientTrustedDomains
	}
	for _, b := range []struct {
		in  *bool
		out *bool
	}{{in.CaseSensitiveCodes, &s.CaseSensitiveCodes}, {in.IsSandbox, &s.IsSandbox},
		{in.ClientRedeemEnabled, &s.ClientRedeemEnabled}, {in.ClientPublishEnabled, &s.ClientPublishEnabled},
		{in.ClientListVouchersEnabled, &s.ClientListVouchersEnabled},
		{in.ClientCreateCustomerEnabled, &s.ClientCreateCustomerEnabled},
		{in.ClientLoyaltyEventsEnabled, &s.ClientLoyaltyEventsEnabled},
		{in.ClientSetVoucherExpirationDateEnabled, &s.ClientSetVoucherExpirationDateEnabled}} {
		if b.in != nil {
			*b.out = *b.in
		}
	}
	return nil
}

func (h handler) createProject(c echo.Context) error {
	var in projectInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if in.Name == nil {
		return apierr.InvalidPayload("Property name is required.")
	}
	cluster := in.ClusterID
	if cluster == nil {
		cluster = in.Cluster
	}
	if cluster == nil || *cluster == "" {
		return apierr.InvalidPayload("Property cluster_id is required: the cluster the project lives in (for example api, us1 or as1).")
	}
	// Pinned to the newest version unless the request names another.
	p := tenancy.Project{Cluster: *cluster, APIVersion: apiversion.Latest,
		Settings: tenancy.Settings{Timezone: "UTC", Currency: "USD", WebhookVersion: apiversion.LatestWebhook}}
	if err := in.apply(&p); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var key, client tenancy.AppKey
	var token, clientToken string
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if key, token, err = tenancy.CreateProject(ctx, tx, &p); err != nil {
			return err
		}
		// The client-side pair, made with the project like the server-side one.
		client, clientToken, err = tenancy.CreateAppKey(ctx, tx, p.ID, tenancy.KeyClient, "default")
		return err
	})
	if errors.Is(err, tenancy.ErrUnknownCluster) {
		return apierr.InvalidPayload(fmt.Sprintf("Property cluster_id names no cluster: %q. GET /management/v1/clusters lists them.", *cluster))
	}
	if errors.Is(err, tenancy.ErrPlanNotFound) {
		return apierr.InvalidPayload(fmt.Sprintf("Property plan names no plan: %q. GET /management/v1/plans lists them.", p.Plan))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, createdProjectView{projectView: viewProject(p),
		ServerSideKey: &keyPair{AppID: key.AppID, AppToken: token}, ClientSideKey: &keyPair{AppID: client.AppID, AppToken: clientToken}})
}

func (h handler) listProjects(c echo.Context) error {
	lq, err := listq.Parse(c.QueryParams(), listq.Spec{DefaultLimit: 100, NoOrder: true})
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var rows []tenancy.Project
	var total int
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if rows, err = tenancy.ListProjects(ctx, tx, lq); err != nil {
			return err
		}
		total, err = tenancy.CountProjects(ctx, tx)
		return err
	})
	if err != nil {
		return err
	}
	data, more, next := listq.PageOf(rows, lq.Limit, func(p tenancy.Project) string { return p.ID }, viewProject)
	return c.JSON(http.StatusOK, listq.List[projectView]{Data: data, Total: &total, More: more, Next: next})
}

func projectNotFound(err error, id string) error {
	if errors.Is(err, tenancy.ErrProjectNotFound) {
		return apierr.NotFound("project", id)
	}
	return err
}

func (h handler) getProject(c echo.Context) error {
	id := c.Param("projectId")
	p, err := tenancy.GetProject(c.Request().Context(), h.pool, id)
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.JSON(http.StatusOK, viewProject(p))
}

func (h handler) updateProject(c echo.Context) error {
	id := c.Param("projectId")
	var in projectInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var p tenancy.Project
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if p, err = tenancy.GetProject(ctx, tx, id); err != nil {
			return err
		}
		for _, cl := range []*string{in.ClusterID, in.Cluster} {
			if cl != nil && *cl != p.Cluster {
				return apierr.InvalidPayload("A project cannot move to another cluster: its data stays in " + p.Cluster + ".")
			}
		}
		if in.APIVersion != nil && *in.APIVersion != p.APIVersion {
			return apierr.InvalidPayload(fmt.Sprintf("Property api_version is pinned (%s): an admin changes it with PUT "+
				"/management/v1/projects/%s/api-version.", p.APIVersion, p.ID))
		}
		if err := in.apply(&p); err != nil {
			return err
		}
		return tenancy.UpdateProject(ctx, tx, &p)
	})
	if errors.Is(err, tenancy.ErrPlanNotFound) {
		return apierr.InvalidPayload(fmt.Sprintf("Property plan names no plan: %q. GET /management/v1/plans lists them.", p.Plan))
	}
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.JSON(http.StatusOK, viewProject(p))
}

func (h handler) deleteProject(c echo.Context) error {
	id := c.Param("projectId")
	ctx := c.Request().Context()
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.DeleteProject(ctx, tx, id) })
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.NoContent(http.StatusNoContent)
}

type keyInput struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

func (h handler) createKey(c echo.Context) error {
	id := c.Param("projectId")
	var in keyInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	kind := tenancy.KeyApp
	switch in.Kind {
	case "", "server":
	case "client":
		kind = tenancy.KeyClient
	default:
		return apierr.InvalidPayload(fmt.Sprintf("Property kind must be server or client, got %q.", in.Kind))
	}
	if len(in.Name) > 200 {
		return apierr.InvalidPayload("Property name must be at most 200 characters.")
	}
	ctx := c.Request().Context()
	var key tenancy.AppKey
	var token string
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		key, token, err = tenancy.CreateAppKey(ctx, tx, id, kind, in.Name)
		return err
	})
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.JSON(http.StatusOK, viewKey(key, token))
}

func (h handler) listKeys(c echo.Context) error {
	id := c.Param("projectId")
	ctx := c.Request().Context()
	if _, err := tenancy.GetProject(ctx, h.pool, id); err != nil {
		return projectNotFound(err, id)
	}
	keys, err := tenancy.ListAppKeys(ctx, h.pool, id)
	if err != nil {
		return err
	}
	// A key's token is shown once, when it is made.
	return c.JSON(http.StatusOK, listq.All(keys, func(k tenancy.AppKey) keyView { return viewKey(k, "") }))
}

func (h handler) revokeKey(c echo.Context) error {
	id, appID := c.Param("projectId"), c.Param("appId")
	ctx := c.Request().Context()
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		_, err := tenancy.RevokeAppKey(ctx, tx, id, appID)
		return err
	})
	if errors.Is(err, tenancy.ErrKeyNotFound) {
		return apierr.NotFound("api_key", appID)
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h handler) listClusters(c echo.Context) error {
	cs, err := tenancy.ListClusters(c.Request().Context(), h.pool)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.All(cs, viewCluster))
}

func (h handler) getCluster(c echo.Context) error {
	cl, err := tenancy.GetCluster(c.Request().Context(), h.pool, c.Param("name"))
	if errors.Is(err, tenancy.ErrUnknownCluster) {
		return apierr.NotFound("cluster", c.Param("name"))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewCluster(cl))
}

type clusterInput struct {
	Region       string `json:"region"`
	Kind         string `json:"kind"`
	APIHost      string `json:"api_host"`
	DownloadHost string `json:"download_host"`
	UpstreamURL  string `json:"upstream_url"`
}

var clusterNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// putCluster registers or updates a cluster, e.g. a customer's dedicated one.
func (h handler) putCluster(c echo.Context) error {
	name := c.Param("name")
	if !clusterNameRe.MatchString(name) {
		return apierr.InvalidPayload("A cluster name is lower-case letters, digits and dashes, like a host name label.")
	}
	var in clusterInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if in.Kind == "" {
		in.Kind = tenancy.Dedicated
	}
	switch {
	case in.Kind != tenancy.Shared && in.Kind != tenancy.Dedicated:
		return apierr.InvalidPayload("Property kind must be shared or dedicated.")
	case in.Region == "":
		return apierr.InvalidPayload("Property region is required.")
	case in.APIHost == "" || strings.ContainsAny(in.APIHost, ":/ "):
		return apierr.InvalidPayload("Property api_host must be a host name, such as acme.api.example.com.")
	}
	if u, err := url.Parse(in.UpstreamURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return apierr.InvalidPayload("Property upstream_url must be an http(s) URL where the cluster's regional instances listen.")
	}
	cl := tenancy.Cluster{Name: name, Region: in.Region, Kind: in.Kind, APIHost: strings.ToLower(in.APIHost),
		DownloadHost: strings.ToLower(in.DownloadHost), UpstreamURL: in.UpstreamURL}
	ctx := c.Request().Context()
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.UpsertCluster(ctx, tx, cl) })
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("cluster", "Another cluster already serves this api_host or download_host.")
	}
	if err != nil {
		return err
	}
	cl, err = tenancy.GetCluster(ctx, h.pool, name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewCluster(cl))
}

// setAPIVersion changes the version a project's requests are served in
// when they name none: only an admin does, never the platform itself.
func (h handler) setAPIVersion(c echo.Context) error {
	id := c.Param("projectId")
	var in struct {
		APIVersion *string `json:"api_version"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if in.APIVersion == nil {
		return apierr.InvalidPayload("Property api_version is required: one of GET /management/v1/api-versions.")
	}
	if !apiversion.Known(*in.APIVersion) {
		return apiversion.Invalid("Property api_version", *in.APIVersion)
	}
	ctx := c.Request().Context()
	var p tenancy.Project
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if p, err = tenancy.GetProject(ctx, tx, id); err != nil {
			return err
		}
		p.APIVersion = *in.APIVersion
		return tenancy.UpdateProject(ctx, tx, &p)
	})
	if err != nil {
		return projectNotFound(err, id)
	}
	return c.JSON(http.StatusOK, viewProject(p))
}

// listAPIVersions lists the API and webhook versions with their changes.
func (h handler) listAPIVersions(c echo.Context) error {
	type item struct {
		apiversion.Version
		Object string `json:"object"`
		Latest bool   `json:"latest"`
	}
	list := func(vs []apiversion.Version, latest, object string) []item {
		out := make([]item, len(vs))
		for i, v := range vs {
			out[i] = item{Version: v, Object: object, Latest: v.Name == latest}
		}
		return out
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data",
		"data": list(apiversion.Versions, apiversion.Latest, "api_version"), "total": len(apiversion.Versions),
		"webhook_versions": list(apiversion.WebhookVersions, apiversion.LatestWebhook, "webhook_version")})
}
