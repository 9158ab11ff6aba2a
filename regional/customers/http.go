package customers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// Referrals reads a customer's referrals summary ({total, campaigns}),
// which GET /v1/customers/{id} answers (regional/referrals).
type Referrals interface {
	Summary(ctx context.Context, projectID, customerID string) (any, error)
}

// Handler serves the customer endpoints.
type Handler struct {
	svc  *Service
	refs Referrals
	segs MemberFilter
}

// Register mounts the endpoints on g (the /v1 group); a customer's answer
// carries their referrals summary from refs (nil: none), and the list's
// segment_id keeps the members segs says (nil: segment_id is refused).
func Register(g *echo.Group, svc *Service, refs Referrals, segs MemberFilter) {
	h := Handler{svc: svc, refs: refs, segs: segs}
	g.POST("/customers", h.create)
	g.GET("/customers", h.list)
	g.GET("/customers/:customerId", h.get)
	g.PUT("/customers/:customerId", h.update)
	g.DELETE("/customers/:customerId", h.delete)
	g.POST("/customers/:customerId/permanent-deletion", h.erase)
	g.POST("/customers/importCSV", h.importCSV)
	g.POST("/customers/bulk/async", h.bulk(JobBulkUpdate))
	g.POST("/customers/metadata/async", h.bulk(JobMetadataUpdate))
}

func (h Handler) create(c echo.Context) error {
	var p Patch
	if err := httpx.Bind(c, &p); err != nil {
		return err
	}
	cust, _, err := h.svc.Upsert(c.Request().Context(), httpx.ProjectID(c), &p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cust.View())
}

func (h Handler) erase(c echo.Context) error {
	d, err := h.svc.Erase(c.Request().Context(), httpx.ProjectID(c), c.Param("customerId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (h Handler) get(c echo.Context) error {
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	cust, err := h.svc.Get(ctx, project, c.Param("customerId"))
	if err != nil {
		return err
	}
	v := cust.View()
	if h.refs != nil {
		if v.Referrals, err = h.refs.Summary(ctx, project, cust.ID); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, v)
}

func (h Handler) update(c echo.Context) error {
	var p Patch
	if err := httpx.Bind(c, &p); err != nil {
		return err
	}
	cust, err := h.svc.Update(c.Request().Context(), httpx.ProjectID(c), c.Param("customerId"), &p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cust.View())
}

func (h Handler) delete(c echo.Context) error {
	if err := h.svc.Delete(c.Request().Context(), httpx.ProjectID(c), c.Param("customerId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h Handler) list(c echo.Context) error {
	lq, err := parseList(c.QueryParams())
	if err != nil {
		return err
	}
	if seg := c.QueryParam("segment_id"); seg != "" {
		if h.segs == nil {
			return apierr.InvalidQuery("segment_id", "segments are not available on this platform")
		}
		ctx, project := c.Request().Context(), httpx.ProjectID(c)
		lq.InSegment = func(arg func(any) string) (string, error) { return h.segs.Members(ctx, project, seg, arg) }
	}
	rows, total, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
	if err != nil {
		return err
	}
	page, more, next := listq.PageOf(rows, lq.Limit, func(c Customer) string { return c.ID }, Customer.View)
	return c.JSON(http.StatusOK, listq.List[View]{DataRef: "customers", Data: page, Total: &total, More: more, Next: next})
}

// listSpec is GET /v1/customers' paging.
var listSpec = listq.Spec{Orders: []string{"-created_at", "created_at", "updated_at", "-updated_at", "source_id", "-source_id"}, Pages: true, MaxPage: 99}

func parseList(q url.Values) (ListQuery, error) {
	var lq ListQuery
	var err error
	if lq.Query, err = listq.Parse(q, listSpec); err != nil {
		return lq, err
	}
	lq.Email, lq.Name, lq.City = q.Get("email"), q.Get("name"), q.Get("city")
	if lq.Metadata, err = parseMetadataFilter(q); err != nil {
		return lq, err
	}
	for _, t := range []struct {
		param string
		dst   **time.Time
	}{{"created_at[after]", &lq.CreatedAfter}, {"created_at[before]", &lq.CreatedBefore},
		{"updated_at[after]", &lq.UpdatedAfter}, {"updated_at[before]", &lq.UpdatedBefore},
		{"starting_after", &lq.CreatedAtAfter}} {
		s := q.Get(t.param)
		if s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return lq, apierr.InvalidQuery(t.param, "must be an ISO 8601 date-time such as 2024-01-31T12:00:00Z, got "+strconv.Quote(s))
		}
		*t.dst = &v
	}
	return lq, nil
}
