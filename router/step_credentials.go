package router

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// credentialResolver checks credentials against the directory
// (tenancy.Resolver).
type credentialResolver interface {
	App(ctx context.Context, appID, token string) (tenancy.AppKey, tenancy.Project, error)
	Bearer(ctx context.Context, token string) (tenancy.AppKey, tenancy.Project, tenancy.Token, error)
	Management(ctx context.Context, id, token string) (tenancy.ManagementKey, error)
	Project(ctx context.Context, id string) (tenancy.Project, error)
}

// linkVerifier checks a download link's token (dltoken.Keys).
type linkVerifier interface {
	Verify(token string, now time.Time) (projectID, exportID string, err error)
}

// credentialsStep finds who the request's credentials name, by the one
// path its surface and headers choose:
//
//   - management API: X-Management-Id and X-Management-Token;
//   - OAuth endpoints: a server-side key, as X-App-Id and X-App-Token or
//     HTTP Basic;
//   - an export's file with the link's token alone: the project the link
//     was made for, good for that one export;
//   - Authorization: Bearer: an OAuth token, held to its scopes;
//   - client-side API: a client key's X-Client-Application-Id and
//     X-Client-Token;
//   - application API: a server-side key's X-App-Id and X-App-Token.
//
// Each API takes its own keys: a client key is public (it ships in
// browsers and apps) and never reaches the application API.
type credentialsStep struct {
	keys  credentialResolver
	links linkVerifier
}

func (s credentialsStep) serve(c echo.Context, x *call, next handler) error {
	req := c.Request()
	var err error
	switch token, hasBearer := bearer(req); {
	case x.surface.api == apiManagement:
		err = s.management(req, x)
	case x.surface.api == apiOAuth:
		err = s.oauthKey(req, x)
	case x.surface.file && !hasBearer && req.Header.Get("X-App-Id") == "" && req.URL.Query().Has("token"):
		err = s.link(req, x)
	case hasBearer:
		err = s.bearer(req, x, token)
	case x.surface.api == apiClient:
		err = s.key(req, x, tenancy.KeyClient, req.Header.Get("X-Client-Application-Id"), req.Header.Get("X-Client-Token"),
			"Send a client-side key's X-Client-Application-Id and X-Client-Token headers.")
	default:
		err = s.key(req, x, tenancy.KeyApp, req.Header.Get("X-App-Id"), req.Header.Get("X-App-Token"),
			"Send valid X-App-Id and X-App-Token headers.")
	}
	if err != nil {
		return err
	}
	return next(c, x)
}

func (s credentialsStep) management(req *http.Request, x *call) error {
	key, err := s.keys.Management(req.Context(), req.Header.Get("X-Management-Id"), req.Header.Get("X-Management-Token"))
	if err != nil {
		return credentialError(err, "Send valid X-Management-Id and X-Management-Token headers.")
	}
	x.caller = caller{management: key, kind: identity.KindManagement}
	return nil
}

func (s credentialsStep) oauthKey(req *http.Request, x *call) error {
	id, token := req.Header.Get("X-App-Id"), req.Header.Get("X-App-Token")
	if scheme, cred, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
			id, token, _ = strings.Cut(string(b), ":")
		}
	}
	return s.key(req, x, tenancy.KeyApp, id, token, "Send a server-side key's X-App-Id and X-App-Token headers, or the pair as HTTP Basic.")
}

// link resolves a download link's token: the project it is for, which
// must be live.
func (s credentialsStep) link(req *http.Request, x *call) error {
	projectID, id, err := s.links.Verify(req.URL.Query().Get("token"), time.Now())
	if err != nil {
		return apierr.Unauthorized("The download token is invalid or has expired; read the export again for a fresh link.")
	}
	if id != x.surface.exportID {
		return apierr.NotFound("export", x.surface.exportID)
	}
	p, err := s.keys.Project(req.Context(), projectID)
	if errors.Is(err, tenancy.ErrProjectNotFound) {
		return apierr.NotFound("export", x.surface.exportID)
	}
	if err != nil {
		return resolverError(err)
	}
	x.caller = caller{project: p, key: tenancy.AppKey{AppID: id}, kind: identity.KindDownload}
	return nil
}

func (s credentialsStep) bearer(req *http.Request, x *call, token string) error {
	k, p, t, err := s.keys.Bearer(req.Context(), token)
	if errors.Is(err, tenancy.ErrBadCredentials) {
		return invalidToken()
	}
	if err != nil {
		return resolverError(err)
	}
	if err := checkScope(t, req.URL.Path); err != nil {
		return err
	}
	x.caller = caller{project: p, key: k, token: t, kind: identity.KindApp}
	return nil
}

// key checks a key pair that must be of kind want.
func (s credentialsStep) key(req *http.Request, x *call, want string, appID, token, hint string) error {
	k, p, err := s.keys.App(req.Context(), appID, token)
	if err == nil && k.Kind != want {
		err = tenancy.ErrBadCredentials
	}
	if err != nil {
		return credentialError(err, hint)
	}
	x.caller = caller{project: p, key: k, kind: identity.KindApp}
	return nil
}

func credentialError(err error, hint string) error {
	if errors.Is(err, tenancy.ErrBadCredentials) {
		return apierr.Unauthorized(hint)
	}
	return resolverError(err)
}
