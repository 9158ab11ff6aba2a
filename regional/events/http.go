package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	"github.com/tallyhq/tally/tenancy"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/events")

// BulkAction is the async action of POST /v1/events/bulk/async.
const BulkAction = "EVENTS.BULK_CREATE"

// BulkPath takes bodies of up to 10 MB (10,000 events), as product jobs do.
const BulkPath = "/v1/events/bulk/async"

// MaxBulk is the most events one bulk request takes.
const MaxBulk = 10_000

type handler struct{ svc *Service }

// Register mounts the event endpoints on the /v1 group.
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/events", h.create)
	g.POST(strings.TrimPrefix(BulkPath, "/v1"), h.bulkCreate)
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

// maxReported is the most refusals a bulk result lists; failed counts all.
const maxReported = 1000

// bulkState is a bulk job's checkpoint: the next event and what came of
// the ones before.
type bulkState struct {
	Next   int         `json:"next"`
	Stored int         `json:"stored"`
	Failed int         `json:"failed"`
	Errors []BulkError `json:"errors"`
}

// refused is st moved past event i, which ae refused.
func (st bulkState) refused(i int, ae *apierr.Error) bulkState {
	msg := ae.Details
	if msg == "" {
		msg = ae.Message
	}
	next := st
	next.Next = i + 1
	next.Failed++
	if len(st.Errors) < maxReported {
		next.Errors = append(append([]BulkError(nil), st.Errors...), BulkError{Index: i, Code: ae.Status, Key: ae.Key, Message: msg})
	}
	return next
}

// bulk stores the events of a bulk request one by one, each as
// POST /v1/events would, and reports the ones refused with their index.
// Each event commits with the job's checkpoint, moved only from where this
// run found it: run again after its worker died, the job goes on from
// there, and a run whose lease lapsed stops instead of storing an event
// twice. A database that fails an event is tried again five times before
// the job fails, saying how far it got.
func (s *Service) bulk(ctx context.Context, job *async.Job) (any, error) {
	input, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	var rs []json.RawMessage
	if err := json.Unmarshal(input, &rs); err != nil {
		return nil, err
	}
	// The events a permanent deletion redacted, read after the input:
	// refused as such, before what the redaction left is checked.
	erased, err := job.Skips(ctx, s.pool, 0, len(rs))
	if err != nil {
		return nil, err
	}
	var st bulkState
	resumed, err := job.Resume(ctx, &st)
	if err != nil {
		return nil, err
	}
	var from any // the checkpoint as this run found it
	if resumed {
		from = job.Seen()
	}
	for i := st.Next; i < len(rs); i++ {
		next := st
		next.Next = i + 1
		var err error = apierr.InvalidPayload(async.ErasedItem)
		if !erased.Marked(i) {
			err = s.bulkOne(ctx, job, rs[i], from, &next, i, len(rs))
		}
		var ae *apierr.Error
		switch {
		case err == nil:
			s.tasks.Wake()
		case errors.As(err, &ae) && ae.Status < 500 && !errors.Is(err, async.ErrSuperseded):
			next, err = s.refuse(ctx, job, st, from, rs[i], i, ae, len(rs))
		}
		if re := (*async.RedactedError)(nil); errors.As(err, &re) {
			// A permanent deletion redacted the refusals listed so far
			// under this run: the event is stored or refused again from
			// the stored checkpoint, which its step (rolled back) did not
			// move, so the run's copy of them is not written back.
			st = bulkState{}
			if err := json.Unmarshal(re.Stored, &st); err != nil {
				return nil, fmt.Errorf("events: the bulk's redacted checkpoint: %w", err)
			}
			from = json.RawMessage(re.Stored)
			i--
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("events: bulk stopped at event %d after storing %d of %d (%d refused): %w", i, st.Stored, len(rs), st.Failed, err)
		}
		st, from = next, next
	}
	if st.Errors == nil {
		st.Errors = []BulkError{}
	}
	return map[string]any{"total": len(rs), "stored": st.Stored, "failed": st.Failed, "errors": st.Errors}, nil
}

// bulkOne stores one event of a bulk request with the job's checkpoint
// moved to next, trying again while the database fails.
func (s *Service) bulkOne(ctx context.Context, job *async.Job, raw json.RawMessage, from any, next *bulkState, i, n int) error {
	var r Request
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		return apierr.InvalidPayload("the event is not a JSON object of POST /v1/events: " + err.Error())
	}
	var err error
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(time.Duration(100<<try) * time.Millisecond)
		}
		var schema tenancy.EventSchema
		if schema, err = s.check(ctx, job.ProjectID, &r); err != nil {
			var ae *apierr.Error
			if errors.As(err, &ae) && ae.Status < 500 {
				return err
			}
			continue
		}
		var counted bool
		if counted, err = s.counted(ctx, job.ProjectID, schema.Name); err != nil {
			continue
		}
		stored := *next
		stored.Stored++
		err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			// An event naming a customer permanently deleted (her values,
			// or an item the erasure redacted) would make a customer of
			// her again: refused, read in the transaction that stores.
			sk, err := job.Skips(ctx, tx, i, i+1)
			if err != nil {
				return err
			}
			if sk.Doc(i, raw) {
				return apierr.InvalidPayload(async.ErasedItem)
			}
			_, b, err := s.store(ctx, tx, job.ProjectID, r, schema, "", "", counted, nil)
			if err != nil {
				return err
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return job.Advance(ctx, tx, from, stored, (i+1)*100/n)
		})
		var ae *apierr.Error
		if err == nil {
			*next = stored
			return nil
		}
		var re *async.RedactedError
		if errors.Is(err, async.ErrSuperseded) || errors.As(err, &re) || (errors.As(err, &ae) && ae.Status < 500) {
			return err
		}
	}
	return err
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
	acts, err := activities(ctx, h.svc.pool, projectID, cust.ID, activityFilter{Start: start, End: end, Type: q.Get("type")}, lq)
	if err != nil {
		return err
	}
	page, more, next := listq.Page(acts, lq.Limit, func(a Activity) string { return a.ID })
	return c.JSON(http.StatusOK, listq.List[Activity]{Data: page, More: more, Next: next})
}
