package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/async"
)

// POST /v1/orders/import: historical orders, up to MaxImport a request,
// written by the ORDERS.IMPORT job as the reference describes it: no
// webhooks, no events, no distributions and no order.paid earning, while
// the customers it writes are re-evaluated for segments as any customer
// write is. A project's imports run one at a time, in the order they were
// made (the reference queues the others, so none is refused).
const (
	JobImport = "ORDERS.IMPORT"
	// MaxImport is the reference's limit of orders a request.
	MaxImport = 2000
	// importInput is the largest body the import takes (the other jobs'
	// limit): 2,000 orders with their items and metadata fit in it.
	importInput = 10 << 20
	// importChunk is how many orders a transaction writes.
	importChunk = 1000
)

// LargeBodies is the import's path, whose body may be importInput long.
var LargeBodies = []string{"/v1/orders/import"}

// importFailure is an order that was not written, as the reference's
// result lists it; Row (Tally's) is its place in the request, 1 for the
// first, which names an order without a source_id too.
type importFailure struct {
	Row      int     `json:"row"`
	SourceID *string `json:"source_id"`
	Reason   string  `json:"reason"`
}

type importProgress = async.Chunked[importFailure]

// HandleJobs registers the order import with reg.
func (s *Service) HandleJobs(reg *async.Registry) { reg.HandleJob(JobImport, s.importJob) }

// importOrders checks that the body is an array of at most MaxImport
// items and starts the job; each item is checked by the job, which
// reports a bad one and writes the others.
func (h Handler) importOrders(c echo.Context) error {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, importInput+1))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || len(b) > importInput {
		return apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large",
			"An order import takes at most 10 MB.")
	} else if err != nil {
		return err
	}
	var items []json.RawMessage
	if json.Unmarshal(b, &items) != nil || len(items) == 0 {
		return httpx.ArrayError(b, "order objects")
	}
	if len(items) > MaxImport {
		return apierr.InvalidPayload(fmt.Sprintf("An import takes at most %d orders, this one has %d: send them in several requests.",
			MaxImport, len(items)))
	}
	var a async.Action
	projectID := httpx.ProjectID(c)
	err = db.InTx(c.Request().Context(), h.svc.pool, func(tx pgx.Tx) error {
		a, err = async.StartJobWithInput(c.Request().Context(), tx, projectID, JobImport, nil, b)
		return err
	})
	if err != nil {
		return err
	}
	if h.svc.wake != nil {
		h.svc.wake()
	}
	// 200, not the 202 of the other jobs: the reference answers so here.
	return c.JSON(http.StatusOK, map[string]any{"async_action_id": a.ID})
}

// importJob is ORDERS.IMPORT: it waits for the project's earlier imports,
// then writes the orders in chunks, each one transaction ending with the
// checkpoint, so a run again after a crash goes on after the last one.
func (s *Service) importJob(ctx context.Context, job *async.Job) (any, error) {
	if err := job.WaitTurn(ctx, JobImport, 20*time.Millisecond, 2*time.Minute); err != nil {
		return nil, err
	}
	in, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(in, &items); err != nil {
		return nil, err
	}
	var st importProgress
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err = async.RunChunks(ctx, job, &st, len(items), importChunk, func(ctx context.Context, tx pgx.Tx, st *importProgress, from, to int) error {
			sk, err := job.Skips(ctx, tx, from, to)
			if err != nil {
				return err
			}
			return s.importChunk(ctx, tx, job.ProjectID, items[from:to], from, sk, st)
		})
		// A single write that made one of the chunk's source_ids between
		// its read and its insert: the chunk again finds it and updates it.
		if attempt < 3 && errors.Is(db.Classify(err), db.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	return map[string]any{"message": fmt.Sprintf("%d order(s) imported successfully, %d failed.", st.DoneCount, st.FailedCount),
		"failed": st.Listed(), "done_count": st.DoneCount, "failed_count": st.FailedCount}, nil
}
