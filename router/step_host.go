package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// hostResolver finds the cluster a host name names (tenancy.Resolver).
type hostResolver interface {
	Host(ctx context.Context, host string) (tenancy.Cluster, tenancy.HostKind, error)
}

// hostStep resolves the request's host name to its cluster: api.<domain>
// is Europe's, us1.api.<domain> the US's, download hosts serve export
// files, and dedicated clusters have names of their own. A host outside
// the domain is refused without a lookup.
type hostStep struct {
	domain string
	// loopback, when set, is the host a request for a bare loopback host
	// is served as (Config.LoopbackHost).
	loopback string
	hosts    hostResolver
}

func (s hostStep) serve(c echo.Context, x *call, next handler) error {
	req := c.Request()
	host := s.hostOf(req)
	if !s.inDomain(host) {
		return unknownHost(host)
	}
	cluster, kind, err := s.hosts.Host(req.Context(), host)
	if errors.Is(err, tenancy.ErrUnknownHost) {
		return unknownHost(host)
	}
	if err != nil {
		return resolverError(err)
	}
	x.route = route{host: host, cluster: cluster, kind: kind}
	return next(c, x)
}

// fixedHostKey marks a request served as one host whatever its Host
// header (Router.HandlerFor).
type fixedHostKey struct{}

// hostOf is the host a request is served as.
func (s hostStep) hostOf(req *http.Request) string {
	if h, ok := req.Context().Value(fixedHostKey{}).(string); ok {
		return h
	}
	host := hostOnly(req.Host)
	if s.loopback != "" {
		switch host {
		case "", "localhost", "127.0.0.1", "[::1]", "::1":
			return s.loopback
		}
	}
	return host
}

func (s hostStep) inDomain(host string) bool {
	d := s.domain
	return len(host) > len(d) && strings.HasSuffix(host, d) && host[len(host)-len(d)-1] == '.'
}

func hostOnly(hostport string) string {
	h := hostport
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

func unknownHost(host string) error {
	return &apierr.Error{Status: http.StatusNotFound, Key: "not_found", Message: "Resource not found",
		Details: fmt.Sprintf("No cluster serves the host %q.", host), ResourceID: host, ResourceType: "cluster"}
}
