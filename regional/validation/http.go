package validation

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/rules"
)

type handler struct{ svc *Service }

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/validation-rules", httpx.Create(svc.Create))
	g.GET("/validation-rules", h.list)
	g.GET("/validation-rules/:validationRuleId", httpx.Read("validationRuleId", svc.Get))
	g.PUT("/validation-rules/:validationRuleId", httpx.Update("validationRuleId", svc.Update))
	g.DELETE("/validation-rules/:validationRuleId", httpx.Delete("validationRuleId", svc.Delete))
	g.POST("/validation-rules/:validationRuleId/assignments", h.assign)
	g.GET("/validation-rules/:validationRuleId/assignments", h.ruleAssignments)
	g.DELETE("/validation-rules/:validationRuleId/assignments/:assignmentId", h.unassign)
	g.GET("/validation-rules-assignments", h.assignments)
}

// list pages as the reference does: limit, page (the first; later pages by
// starting_after_id), order, start_date and end_date, with total.
func (h handler) list(c echo.Context) error {
	spec := listq.Spec{Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at", "name", "-name"}, Pages: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		q := c.QueryParams()
		var f ruleFilter
		var err error
		if f.start, err = dateParam(q, "start_date"); err != nil {
			return nil, err
		}
		if f.end, err = dateParam(q, "end_date"); err != nil {
			return nil, err
		}
		vs, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), f, lq)
		return listq.List[View]{Data: vs, Total: &total, More: more, Next: next}, err
	})
}

func dateParam(q url.Values, name string) (*time.Time, error) {
	s := q.Get(name)
	if s == "" {
		return nil, nil
	}
	t, ok := rules.ParseTime(s)
	if !ok {
		return nil, apierr.InvalidQuery(name, "must be an ISO 8601 date-time, got "+strconv.Quote(s))
	}
	return &t, nil
}

// force reads the `force` query parameter of an assignment.
func force(q url.Values) (bool, error) {
	switch v := q.Get("force"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, apierr.InvalidQuery("force", "must be true (replace the rule's assignment to the same object) or false, got "+strconv.Quote(v))
	}
}

func (h handler) assign(c echo.Context) error {
	f, err := force(c.QueryParams())
	if err != nil {
		return err
	}
	return httpx.WithBody(c, func(b Body) (any, error) {
		return h.svc.Assign(c.Request().Context(), httpx.ProjectID(c), c.Param("validationRuleId"), b, f)
	})
}

func (h handler) unassign(c echo.Context) error {
	if err := h.svc.Unassign(c.Request().Context(),
		AssignmentRef{Project: httpx.ProjectID(c), Rule: c.Param("validationRuleId"), ID: c.Param("assignmentId")}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

var assignmentSpec = listq.Spec{Orders: []string{"created_at", "-created_at"}, Pages: true}

func (h handler) ruleAssignments(c echo.Context) error {
	return h.listAssignments(c, assignmentFilter{ruleID: c.Param("validationRuleId")}, true)
}

// assignments lists assignments across rules, by related_object_id and rule.
func (h handler) assignments(c echo.Context) error {
	q := c.QueryParams()
	return h.listAssignments(c, assignmentFilter{ruleID: q.Get("rule"), objectID: q.Get("related_object_id")}, false)
}

func (h handler) listAssignments(c echo.Context, f assignmentFilter, mustExist bool) error {
	return httpx.WithList(c, assignmentSpec, func(lq listq.Query) (any, error) {
		lq.Key = "id" // creation order is id order
		vs, total, more, next, err := h.svc.Assignments(c.Request().Context(), httpx.ProjectID(c), f, mustExist, lq)
		return listq.List[AssignmentView]{Data: vs, Total: &total, More: more, Next: next}, err
	})
}
