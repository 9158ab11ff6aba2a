package router

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
)

// forwardStep ends the chain. It signs what the steps learned into the
// identity header and forwards the request: to the management service, or
// to the cluster's regional instance, streaming an export's file with a
// write deadline that moves with each piece; the OAuth endpoints it
// serves itself (oauth.go).
type forwardStep struct {
	signer     *identity.Signer
	fwd        *forwarder
	management *url.URL
	upstreams  *upstreamCache
	oauth      oauthEndpoint
	log        *slog.Logger
}

func (s *forwardStep) handle(c echo.Context, x *call) error {
	req := c.Request()
	requestID := c.Response().Header().Get(apierr.HeaderRequestID)
	expires := time.Now().Add(identity.TTL)
	switch x.surface.api {
	case apiOAuth:
		return s.oauth.serve(c, x.caller)
	case apiManagement:
		signed := s.signer.Sign(identity.Identity{Audience: identity.AudienceManagement, Cluster: x.route.cluster.Name,
			Method: req.Method, Path: upstreamPath(s.management, req), Query: req.URL.RawQuery, Kind: identity.KindManagement,
			KeyID: x.caller.management.ID, RequestID: requestID, Expires: expires})
		return s.fwd.forward(c, s.management, "management service", signed, x.client, "")
	}
	upstream, err := s.upstreams.get(x.route.cluster)
	if err != nil {
		return err
	}
	if x.surface.file {
		toFile(req, x.surface.exportID)
		w, err := streamFile(c.Response().Writer)
		if err != nil {
			s.log.Warn("a file download keeps the listener's write timeout", "err", err)
		}
		c.Response().Writer = w
	}
	kind := x.caller.kind
	if x.surface.api == apiClient {
		kind = identity.KindClient // whatever the credential: the client API's narrower rights
	}
	p, t := x.caller.project, x.caller.token
	signed := s.signer.Sign(identity.Identity{Audience: identity.AudienceRegional, ProjectID: p.ID, Cluster: x.route.cluster.Name,
		Method: req.Method, Path: upstreamPath(upstream, req), Query: req.URL.RawQuery, Kind: kind, KeyID: x.caller.key.AppID,
		Scopes: t.Scopes, APIVersion: x.version, RequestID: requestID, Expires: expires, Customer: t.Customer})
	return s.fwd.forward(c, upstream, "cluster "+x.route.cluster.Name, signed, x.client, x.version)
}
