package locations

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

type handler struct{ svc *Service }

// Register mounts /v1/locations on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.GET("/locations", h.list)
	g.GET("/locations/:locationId", httpx.Read("locationId", svc.Get))
	g.POST("/locations", httpx.Create(svc.Create))
	g.PUT("/locations/:locationId", httpx.Update("locationId", svc.Update))
	g.DELETE("/locations/:locationId", httpx.Delete("locationId", svc.Delete))
}

// listSpec: the reference's list has limit, order, filters and end_date
// and no page; the starting_after_id cursor is Tally's way past a page.
var listSpec = listq.Spec{Orders: []string{"-created_at", "created_at", "-updated_at", "updated_at"}}

var listFields = map[string]filters.Field{
	"name":       {Kind: filters.String, Column: "name"},
	"created_at": {Kind: filters.DateTime, Column: "created_at"},
	"updated_at": {Kind: filters.DateTime, Column: "updated_at"},
}

// orderKeys are the expressions the orders sort by; a location never
// updated sorts by its creation among updated ones.
var orderKeys = map[string]string{"created_at": "created_at", "updated_at": "COALESCE(updated_at, created_at)"}

// ListQuery is a parsed GET /v1/locations.
type ListQuery struct {
	listq.Query
	Filter filters.Filter
	End    *time.Time // end_date: only locations created before it
}

// ParseList reads GET /v1/locations' query.
func ParseList(q url.Values) (ListQuery, error) {
	var lq ListQuery
	var err error
	if lq.Query, err = listq.Parse(q, listSpec); err != nil {
		return lq, err
	}
	if s := q.Get("end_date"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return lq, apierr.InvalidQuery("end_date", "must be an ISO 8601 date-time, got "+strconv.Quote(s))
		}
		lq.End = &t
	}
	lq.Filter, err = filters.Parse(q, listFields)
	return lq, err
}

func (h handler) list(c echo.Context) error {
	lq, err := ParseList(c.QueryParams())
	if err != nil {
		return err
	}
	page, total, more, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
	if err != nil {
		return err
	}
	views := make([]View, len(page))
	for i, l := range page {
		views[i] = l.View()
	}
	next := ""
	if more {
		next = page[len(page)-1].ID
	}
	return c.JSON(http.StatusOK, listq.List[View]{Data: views, Total: &total, More: more, Next: next})
}
