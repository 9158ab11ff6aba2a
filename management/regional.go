package management

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// Tenant data lives in the regional databases, so what operators ask about
// it (webhook deliveries, parked tasks, API call figures) management asks the
// cluster's regional service, on its /internal/v1 endpoints, signing a
// management identity as the router does.

var regionalClient = &http.Client{Timeout: 10 * time.Second}

// askRegional forwards the request to path on cluster and relays the answer.
func (h handler) askRegional(c echo.Context, cluster, path string) error {
	res, err := h.callRegional(c, cluster, c.Request().Method, path, c.Request().URL.RawQuery, nil)
	if err != nil {
		return err
	}
	return relay(c, res)
}

// relay answers with a regional answer as it came: its status, its
// content type and its body.
func relay(c echo.Context, res *http.Response) error {
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "" {
		c.Response().Header().Set("Content-Type", ct)
	}
	c.Response().WriteHeader(res.StatusCode)
	_, err := io.Copy(c.Response(), res.Body)
	return err
}

// callRegional sends method path?query with body (nil: none) to cluster's
// regional service, signed as the management service, and answers its
// response, whose body the caller closes.
func (h handler) callRegional(c echo.Context, cluster, method, path, query string, body []byte) (*http.Response, error) {
	ctx := c.Request().Context()
	cl, err := tenancy.GetCluster(ctx, h.pool, cluster)
	if errors.Is(err, tenancy.ErrUnknownCluster) {
		return nil, apierr.NotFound("cluster", cluster)
	}
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cl.UpstreamURL)
	if err != nil {
		return nil, err
	}
	u.Path = singleSlash(u.Path, path)
	u.RawQuery = query
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(identity.Header, h.operator.Sign(identity.Identity{Audience: identity.AudienceOperator, Cluster: cluster,
		Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.RawQuery, Kind: identity.KindManagement,
		RequestID: c.Response().Header().Get(apierr.HeaderRequestID), Expires: time.Now().Add(identity.TTL)}))
	req.Header.Set(apierr.HeaderRequestID, c.Response().Header().Get(apierr.HeaderRequestID))
	res, err := regionalClient.Do(req)
	if err != nil {
		e := apierr.Unavailable("The cluster " + cluster + " cannot be reached right now; try again shortly.")
		e.Cause = err
		return nil, e
	}
	return res, nil
}

func singleSlash(a, b string) string {
	if len(a) > 0 && a[len(a)-1] == '/' {
		a = a[:len(a)-1]
	}
	return a + b
}

func (h handler) listDeliveries(c echo.Context) error {
	p, err := h.webhookProject(c)
	if err != nil {
		return err
	}
	return h.askRegional(c, p.Cluster, "/internal/v1/projects/"+url.PathEscape(p.ID)+"/webhooks/"+
		url.PathEscape(c.Param("webhookId"))+"/deliveries")
}

func (h handler) usage(c echo.Context) error {
	id := c.Param("projectId")
	p, err := tenancy.GetProject(c.Request().Context(), h.pool, id)
	if err != nil {
		return projectNotFound(err, id)
	}
	return h.askRegional(c, p.Cluster, "/internal/v1/projects/"+url.PathEscape(p.ID)+"/usage")
}

// listTemplates is GET /projects/{id}/templates/campaigns: the project's
// campaign templates, kept in its cluster.
func (h handler) listTemplates(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	return h.askRegional(c, p.Cluster, "/internal/v1/projects/"+url.PathEscape(p.ID)+"/templates/campaigns")
}

func (h handler) parked(c echo.Context) error {
	return h.askRegional(c, c.Param("name"), "/internal/v1/outbox/parked")
}

func (h handler) requeue(c echo.Context) error {
	return h.askRegional(c, c.Param("name"), "/internal/v1/outbox/"+url.PathEscape(c.Param("projectId"))+"/"+
		url.PathEscape(c.Param("taskId"))+"/requeue")
}
