package router

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// The router handles a request as a chain of steps, each its own small
// type in a step_*.go file, in the order New writes down once:
//
//	client address → host → surface → CORS → credentials → cluster check →
//	origin → version → limits → forward (or download, or the OAuth endpoint)
//
// Each step either answers the request (an error, a preflight) or fills
// its own part of the request's call and hands on to the next. A step
// reads the parts earlier steps filled, never how they filled them, so
// each is tested alone (step_*_test.go) with a call it is handed.
//
// The call is the request's context for the chain: one typed value per
// step, made once per request and passed down explicitly, where
// context.WithValue per step would cost an allocation and a type
// assertion each and leave a missing value to run time.

// call is what the steps learn of one request.
type call struct {
	client  clientAddr // clientStep: who is calling, through which proxies
	route   route      // hostStep: the cluster the host names
	surface surface    // surfaceStep: which API the request is for
	caller  caller     // credentialsStep: the project and key
	version string     // versionStep: the API version it is served at
}

// route is the cluster a request's host names, and how it names it.
type route struct {
	host    string
	cluster tenancy.Cluster
	kind    tenancy.HostKind
}

// api is one of the interfaces the router serves.
type api uint8

const (
	apiApp        api = iota // /v1/…: the application API, server-side keys
	apiClient                // /client/v1/…: the client-side API, client keys, CORS
	apiManagement            // /management/…: platform admins, forwarded to management
	apiOAuth                 // /v1/oauth/…: served by the router itself
)

// surface is which API a request is for, and whether it asks for an
// export's file.
type surface struct {
	api      api
	exportID string // GET /v1/exports/{id}: the export
	file     bool   // its file rather than its JSON
}

// caller is who a request's credentials name.
type caller struct {
	project    tenancy.Project
	key        tenancy.AppKey        // an application or client key's; the export's id for a link
	token      tenancy.Token         // a Bearer token's
	management tenancy.ManagementKey // on the management API
	kind       string                // identity.KindApp, KindDownload or KindManagement
}

// hasProject says the credentials named a project (all but management's).
func (c caller) hasProject() bool { return c.kind != identity.KindManagement }

// handler handles a request at the end of the chain, or from a step on.
type handler func(c echo.Context, x *call) error

// step is one stage of the chain: it answers the request itself, or fills
// its part of x and calls next.
type step interface {
	serve(c echo.Context, x *call, next handler) error
}

// chain joins steps in order in front of end, once, at construction: a
// request then costs one closure call per step and nothing else.
func chain(end handler, steps ...step) handler {
	h := end
	for i := len(steps) - 1; i >= 0; i-- {
		s, next := steps[i], h
		h = func(c echo.Context, x *call) error { return s.serve(c, x, next) }
	}
	return h
}
