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
	as := []Action{a}
	if err := redactActions(c.Request().Context(), h.pool, httpx.ProjectID(c), as); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, as[0])
}

func (h handler) list(c echo.Context) error {
	q := c.QueryParams()
	// Newest first, as the reference lists them.
	lq, err := listq.Parse(q, listq.Spec{NoOrder: true, DefaultOrder: "-id"})
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
	rows, err := ListActions(c.Request().Context(), h.pool, httpx.ProjectID(c), end, lq)
	if err != nil {
		return err
	}
	page, more, next := listq.Page(rows, lq.Limit, func(a Action) string { return a.ID })
	if err := redactActions(c.Request().Context(), h.pool, httpx.ProjectID(c), page); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[Action]{DataRef: "async_actions", Data: page, More: more, Next: next})
}

func (h handler) parked(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{DefaultLimit: 50, NoOrder: true})
	if err != nil {
		return err
	}
	// The outbox of all projects: its cursor is two-part (after_project_id,
	// after_id), the last row's, not starting_after_id.
	rows, err := ListParked(c.Request().Context(), h.pool, q.Get("after_project_id"), q.Get("after_id"), lq.Limit+1)
	if err != nil {
		return err
	}
	page, more, _ := listq.Page(rows, lq.Limit, func(r Row) string { return r.ID })
	return c.JSON(http.StatusOK, listq.List[Row]{Data: page, More: more})
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
