package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/events")

// BulkAction is the async action of POST /v1/events/bulk/async.
const BulkAction = "EVENTS.BULK_CREATE"

// MaxBulk is the most events one bulk request takes.
const MaxBulk = 10_000

type handler struct{ svc *Service }

// Register mounts the event endpoints on the /v1 group.
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/events", h.create)
	g.POST("/events/bulk/async", h.bulkCreate)
	g.GET("/customers/:customerId/activity", h.activity)
	g.GET("/customers/:customerId/activities", h.activity) // the name older SDKs call
}

// rawBody reads the request body once, keeping it for Bind.
func rawBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	}
	if err != nil {
		return nil, apierr.InvalidPayload("The request body could not be read: " + err.Error() + ".")
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func (h handler) create(c echo.Context) error {
	body, err := rawBody(c)
	if err != nil {
		return err
	}
	var r Request
	if err := httpx.Bind(c, &r); err != nil {
		return err
	}
	return httpx.Reply(c)(h.svc.Create(c.Request().Context(), httpx.ProjectID(c), r, c.Request().Header.Get("Idempotency-Key"), body))
}

func (h handler) bulkCreate(c echo.Context) error {
	body, err := rawBody(c)
	if err != nil {
		return err
	}
	var rs []json.RawMessage
	if err := httpx.Bind(c, &rs); err != nil {
		return err
	}
	if len(rs) == 0 || len(rs) > MaxBulk {
		return apierr.InvalidPayload(fmt.Sprintf("The body is an array of 1 to %d events, as POST /v1/events takes them.", MaxBulk))
	}
	ctx := c.Request().Context()
	var a async.Action
	err = db.InTx(ctx, h.svc.pool, func(tx pgx.Tx) error {
		var err error
		a, err = async.StartJobWithInput(ctx, tx, httpx.ProjectID(c), BulkAction, map[string]int{"events": len(rs)}, body)
		return err
	})
	if err != nil {
		return err
	}
	h.svc.tasks.Wake()
	return c.JSON(http.StatusAccepted, map[string]any{"async_action_id": a.ID})
}

// BulkError is one event of a bulk request that was not stored.
type BulkError struct {
	Index   int    `json:"index"`
	Code    int    `json:"code"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

// bulk stores the events of a bulk request one by one, each as
// POST /v1/events would, and reports the ones refused with their index.
// Run again after its worker died, it goes on from its checkpoint.
func (s *Service) bulk(ctx context.Context, job *async.Job) (any, error) {
	input, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	var rs []json.RawMessage
	if err := json.Unmarshal(input, &rs); err != nil {
		return nil, err
	}
	type state struct {
		Next   int         `json:"next"`
		Stored int         `json:"stored"`
		Errors []BulkError `json:"errors"`
	}
	var st state
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	for i := st.Next; i < len(rs); i++ {
		var r Request
		d := json.NewDecoder(bytes.NewReader(rs[i]))
		d.UseNumber()
		err := d.Decode(&r)
		if err != nil {
			err = apierr.InvalidPayload("the event is not a JSON object of POST /v1/events: " + err.Error())
		}
		if err == nil {
			var schema, cerr = s.check(ctx, job.ProjectID, &r)
			if cerr != nil {
				err = cerr
			} else {
				err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
					if _, err := s.store(ctx, tx, job.ProjectID, r, schema, "", ""); err != nil {
						return err
					}
					// The event and the job's progress commit together: a
					// rerun does not store it twice.
					return job.Checkpoint(ctx, tx, state{Next: i + 1, Stored: st.Stored + 1, Errors: st.Errors}, (i+1)*100/len(rs))
				})
			}
		}
		var ae *apierr.Error
		switch {
		case err == nil:
			st.Stored++
			st.Next = i + 1
			s.tasks.Wake()
			continue
		case errors.As(err, &ae) && ae.Status < 500:
			msg := ae.Details
			if msg == "" {
				msg = ae.Message
			}
			st.Errors = append(st.Errors, BulkError{Index: i, Code: ae.Status, Key: ae.Key, Message: msg})
			st.Next = i + 1
			if err := job.Checkpoint(ctx, s.pool, st, (i+1)*100/len(rs)); err != nil {
				return nil, err
			}
		default:
			return nil, err // the database: the job fails, its checkpoint kept
		}
	}
	if st.Errors == nil {
		st.Errors = []BulkError{}
	}
	return map[string]any{"total": len(rs), "stored": st.Stored, "failed": len(st.Errors), "errors": st.Errors}, nil
}

// Activity is an entry of a customer's activity.
type Activity struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt jsonx.Time      `json:"created_at"`
	GroupID   *string         `json:"group_id"`
}

func (h handler) activity(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{Orders: []string{"-created_at", "created_at"}})
	if err != nil {
		return err
	}
	var start, end *time.Time
	for name, dst := range map[string]**time.Time{"start_date": &start, "end_date": &end} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return apierr.InvalidQuery(name, "must be a date-time such as 2024-01-31T12:00:00Z, got "+fmt.Sprintf("%q", v))
			}
			*dst = &t
		}
	}
	ctx := c.Request().Context()
	projectID := httpx.ProjectID(c)
	cust, err := h.svc.customers.Get(ctx, projectID, c.Param("customerId"))
	if err != nil {
		return err
	}
	lq.Key = "id" // ids are in creation order
	args := []any{projectID, cust.ID}
	where := `project_id = $1 AND customer_id = $2`
	if start != nil {
		args = append(args, *start)
		where += fmt.Sprintf(" AND created_at >= $%d", len(args))
	}
	if end != nil {
		args = append(args, *end)
		where += fmt.Sprintf(" AND created_at <= $%d", len(args))
	}
	if t := q.Get("type"); t != "" {
		args = append(args, t)
		where += fmt.Sprintf(" AND type = $%d", len(args))
	}
	cond, orderBy, args := lq.Keyset("customer_activities", "id", args)
	args = append(args, lq.Limit+1)
	rows, err := h.svc.pool.Query(ctx, `SELECT id, type, data, created_at, group_id FROM customer_activities WHERE `+where+cond+
		` ORDER BY `+orderBy+fmt.Sprintf(" LIMIT $%d", len(args)), args...)
	if err != nil {
		return err
	}
	acts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Activity, error) {
		var a Activity
		var data []byte
		err := r.Scan(&a.ID, &a.Type, &data, &a.CreatedAt.Time, &a.GroupID)
		a.Data = data
		return a, err
	})
	if err != nil {
		return err
	}
	page, more, next := listq.Page(acts, lq.Limit, func(a Activity) string { return a.ID })
	return c.JSON(http.StatusOK, listq.List[Activity]{Data: page, More: more, Next: next})
}
