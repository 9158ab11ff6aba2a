package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// OAuth 2.0 client credentials (the interface's alternative to the key
// pair): POST /v1/oauth/token issues a 900 s Bearer token to a server-side
// key for space-separated scopes, /v1/oauth/introspect describes one,
// /v1/oauth/token/revoke revokes one. The router serves them itself and
// checks each Bearer request's scope against its route: "api", or the
// route's resource ("loyalties" for /v1/loyalties/…; "client_api" or
// "client_<resource>" on /client/v1/…), as the reference's operations pair
// them.

// scopes are the scopes a token may be issued for.
var scopes = map[string]bool{}

func init() {
	for _, s := range strings.Fields(`api client_api vouchers campaigns promotions exports publications validations
		qualifications redemptions customers orders products skus validation-rules validation-rules-assignments segments
		events rewards assets task-results loyalties consents async-actions product-collections categories
		metadata-schemas locations referrals trash-bin templates client_vouchers client_promotions client_publish
		client_validate client_validations client_qualifications client_redeem client_redemptions client_customers
		client_events client_consents`) {
		scopes[s] = true
	}
}

const oauthPrefix = "/v1/oauth/"

// requiredScopes are the scopes, any one of which grants a route.
func requiredScopes(path string) []string {
	if rest, ok := strings.CutPrefix(path, "/client/v1/"); ok {
		seg, _, _ := strings.Cut(rest, "/")
		return []string{"client_api", "client_" + seg}
	}
	rest := strings.TrimPrefix(path, "/v1/")
	seg, _, _ := strings.Cut(rest, "/")
	return []string{"api", seg}
}

// bearer is the token of an Authorization: Bearer header, if any.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

func invalidToken() *apierr.Error {
	e := apierr.Unauthorized("The access token is unknown, expired or revoked; ask POST /v1/oauth/token for a new one.")
	e.Header = http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}}
	return e
}

// checkScope refuses a token without any of the route's scopes.
func checkScope(t tenancy.Token, path string) error {
	need := requiredScopes(path)
	for _, s := range need {
		if slices.Contains(t.Scopes, s) {
			return nil
		}
	}
	e := apierr.New(http.StatusForbidden, "missing_scope", "Forbidden",
		fmt.Sprintf("The access token's scopes (%s) grant no access to %s: it needs %s or %s.",
			strings.Join(t.Scopes, " "), path, need[0], need[1]))
	e.Header = http.Header{"Www-Authenticate": {fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s %s"`, need[0], need[1])}}
	return e
}

func oauthError(key, message string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, key, message, "")
}

// tokenView is the reference's answer of the token and introspect endpoints.
type tokenView struct {
	AccessToken string `json:"access_token,omitempty"`
	ClientID    string `json:"client_id"`
	ExpiresAt   int64  `json:"expires_at"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	TokenType   string `json:"token_type"`
	Active      *bool  `json:"active,omitempty"`
	// A client-side token's binding (Tally's extension).
	Customer string `json:"customer,omitempty"`
	Origin   string `json:"origin,omitempty"`
}

// binding reads a token request's customer and origin: the merchant's
// server mints, for a browser, a token good for client-side scopes only,
// from one of the project's allowed origins and for one customer.
func binding(req *http.Request, p tenancy.Project, scopes []string) (tenancy.Binding, error) {
	b := tenancy.Binding{Customer: req.PostForm.Get("customer"), Origin: req.PostForm.Get("origin")}
	if b == (tenancy.Binding{}) {
		return b, nil
	}
	var server []string
	for _, s := range scopes {
		if !strings.HasPrefix(s, "client_") {
			server = append(server, s)
		}
	}
	switch {
	case len(server) > 0:
		e := oauthError("invalid_scope", "Invalid scope: "+strings.Join(server, ","))
		e.Details = "A token bound to a customer or an origin is for the client-side API: its scopes are client_api or client_* ones."
		return b, e
	case b.Customer != "" && b.Origin == "":
		return b, oauthError("missing_parameters", "Missing parameters: origin")
	case len(b.Customer) > 200 || (b.Customer != "" && strings.TrimSpace(b.Customer) != b.Customer) ||
		!utf8.ValidString(b.Customer) || strings.IndexByte(b.Customer, 0) >= 0:
		return b, oauthError("invalid_customer", "Invalid customer: a customer's source_id or id, at most 200 characters of text, "+
			"without surrounding spaces")
	case !tenancy.ValidOrigin(b.Origin) || !p.Settings.TrustsOrigin(b.Origin):
		e := oauthError("invalid_origin", "Invalid origin: "+b.Origin)
		e.Details = "The origin must be one of the project's allowed website URLs (client_trusted_domains), such as https://shop.example."
		return b, e
	}
	return b, nil
}

// tokenStore issues, reads and revokes access tokens (tenancy.Resolver).
type tokenStore interface {
	IssueToken(ctx context.Context, key tenancy.AppKey, scopes []string, b tenancy.Binding) (string, tenancy.Token, error)
	Token(ctx context.Context, token string) (tenancy.Token, error)
	RevokeToken(ctx context.Context, projectID, token string) error
}

// oauthEndpoint serves the OAuth endpoints to a caller the chain has
// authenticated with a server-side key (credentialsStep) and held to its
// project's limits (limitStep): each call reads or writes the directory.
type oauthEndpoint struct {
	tokens tokenStore
	now    func() time.Time
}

func (o oauthEndpoint) serve(c echo.Context, who caller) error {
	req := c.Request()
	key, project := who.key, who.project
	if err := req.ParseForm(); err != nil {
		return apierr.InvalidPayload("The body is a form (application/x-www-form-urlencoded): " + err.Error())
	}
	ctx := req.Context()
	now := o.now()
	switch strings.TrimPrefix(req.URL.Path, oauthPrefix) {
	case "token":
		if req.PostForm.Get("grant_type") != "client_credentials" {
			return oauthError("invalid_grant_type", "Invalid grant_type")
		}
		asked := strings.Fields(req.PostForm.Get("scope"))
		var bad []string
		for _, s := range asked {
			if !scopes[s] {
				bad = append(bad, s)
			}
		}
		if len(asked) == 0 || len(bad) > 0 {
			e := oauthError("invalid_scope", "Invalid scope: "+strings.Join(bad, ","))
			e.Details = "scope is a space-separated list of: api, client_api, or resources such as loyalties, customers, orders."
			return e
		}
		slices.Sort(asked)
		bind, err := binding(req, project, asked)
		if err != nil {
			return err
		}
		token, t, err := o.tokens.IssueToken(ctx, key, slices.Compact(asked), bind)
		if errors.Is(err, tenancy.ErrTooManyTokens) {
			return apierr.New(http.StatusBadRequest, "too_many_tokens", "Too many tokens",
				fmt.Sprintf("A project has at most %d live access tokens; revoke some or let them expire.", tenancy.MaxTokens))
		}
		if err != nil {
			return resolverError(err)
		}
		return c.JSON(http.StatusOK, tokenView{AccessToken: token, ClientID: key.AppID, ExpiresAt: t.ExpiresAt.Unix(),
			ExpiresIn: int64(tenancy.TokenLifetime / time.Second), Scope: strings.Join(t.Scopes, " "), TokenType: "Bearer",
			Customer: t.Customer, Origin: t.Origin})
	case "introspect":
		token := req.PostForm.Get("access_token")
		if token == "" {
			return oauthError("missing_parameters", "Missing parameters: access_token")
		}
		t, err := o.tokens.Token(ctx, token)
		if errors.Is(err, tenancy.ErrTokenNotFound) || (err == nil && (!t.Live(now) || t.ProjectID != project.ID)) {
			return c.JSON(http.StatusOK, map[string]bool{"active": false})
		}
		if err != nil {
			return resolverError(err)
		}
		active := true
		return c.JSON(http.StatusOK, tokenView{ClientID: t.AppID, ExpiresAt: t.ExpiresAt.Unix(),
			ExpiresIn: max(int64(t.ExpiresAt.Sub(now).Seconds()), 0), Scope: strings.Join(t.Scopes, " "), TokenType: "Bearer", Active: &active,
			Customer: t.Customer, Origin: t.Origin})
	case "token/revoke":
		token := req.PostForm.Get("access_token")
		if token == "" {
			return oauthError("missing_parameters", "Missing parameters: access_token")
		}
		err := o.tokens.RevokeToken(ctx, project.ID, token)
		if errors.Is(err, tenancy.ErrTokenNotFound) {
			return apierr.NotFound("access_token", "")
		}
		if err != nil {
			return resolverError(err)
		}
		return c.NoContent(http.StatusNoContent)
	}
	return apierr.New(http.StatusNotFound, "not_found", "Resource not found", "No such endpoint.")
}
