package async

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

type handler struct{ pool *db.Pool }

// Register mounts GET /async-actions and GET /async-actions/{id} on g (/v1).
func Register(g *echo.Group, pool *db.Pool) {
	h := handler{pool}
	g.GET("/async-actions", h.list)
	g.GET("/async-actions/:asyncActionId", h.get)
}

// RegisterInternal mounts the operators' outbox endpoints on g (/internal/v1),
// reached only through management.
func RegisterInternal(g *echo.Group, pool *db.Pool) {
	h := handler{pool}
	g.GET("/outbox/parked", h.parked)
	g.POST("/outbox/:projectId/:taskId/requeue", h.requeue)
}

func (h handler) get(c echo.Context) error {
	id := c.Param("asyncActionId")
	a, err := GetAction(c.Request().Context(), h.pool, httpx.ProjectID(c), id)
	if err != nil {
		if err == db.ErrNotFound {
			return apierr.NotFound("async_action", id)
		}
		return err
	}
	return c.JSON(http.StatusOK, a)
}

type actionList struct {
	Object            string   `json:"object"`
	DataRef           string   `json:"data_ref"`
	AsyncActions      []Action `json:"async_actions"`
	HasMore           bool     `json:"has_more"`
	MoreStartingAfter string   `json:"more_starting_after,omitempty"`
}

func (h handler) list(c echo.Context) error {
	q := c.QueryParams()
	limit, err := listq.Limit(q, 10)
	if err != nil {
		return err
	}
	var end *time.Time
	if s := q.Get("end_date"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return apierr.InvalidQuery("end_date", "must be an ISO 8601 date-time, got "+strconv.Quote(s))
		}
		end = &t
	}
	rows, err := ListActions(c.Request().Context(), h.pool, httpx.ProjectID(c), end, q.Get("starting_after_id"), limit+1)
	if err != nil {
		return err
	}
	page, more, next := listq.Page(rows, limit, func(a Action) string { return a.ID })
	if page == nil {
		page = []Action{}
	}
	return c.JSON(http.StatusOK, actionList{Object: "list", DataRef: "async_actions", AsyncActions: page, HasMore: more,
		MoreStartingAfter: next})
}

type parkedList struct {
	Object  string `json:"object"`
	DataRef string `json:"data_ref"`
	Data    []Row  `json:"data"`
	HasMore bool   `json:"has_more"`
}

func (h handler) parked(c echo.Context) error {
	q := c.QueryParams()
	limit, err := listq.Limit(q, 50)
	if err != nil {
		return err
	}
	rows, err := ListParked(c.Request().Context(), h.pool, q.Get("after_project_id"), q.Get("after_id"), limit+1)
	if err != nil {
		return err
	}
	page, more, _ := listq.Page(rows, limit, func(r Row) string { return r.ID })
	if page == nil {
		page = []Row{}
	}
	return c.JSON(http.StatusOK, parkedList{Object: "list", DataRef: "data", Data: page, HasMore: more})
}

func (h handler) requeue(c echo.Context) error {
	err := Requeue(c.Request().Context(), h.pool, c.Param("projectId"), c.Param("taskId"))
	if err == db.ErrNotFound {
		return apierr.NotFound("parked_task", c.Param("taskId"))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
