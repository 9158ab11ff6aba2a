package webhooks

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
)

// Attempt is one try of a delivery.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	StatusCode *int       `json:"status_code"`
	Error      *string    `json:"error"`
	DurationMS int        `json:"duration_ms"`
	At         jsonx.Time `json:"at"`
}

// Delivery is an event's delivery to one webhook, with its attempts.
type Delivery struct {
	ID             string      `json:"id"`
	WebhookID      string      `json:"webhook_id"`
	EventID        string      `json:"event_id"`
	EventType      string      `json:"event_type"`
	TargetURL      string      `json:"target_url"`
	Status         string      `json:"status"` // pending, delivered, failed (gave up), canceled
	Attempts       []Attempt   `json:"attempts"`
	LastStatusCode *int        `json:"last_status_code"`
	CreatedAt      jsonx.Time  `json:"created_at"`
	FinishedAt     *jsonx.Time `json:"finished_at"`
	Object         string      `json:"object"`
}

// RegisterInternal mounts the operators' delivery listing on g (/internal/v1).
func RegisterInternal(g *echo.Group, pool *db.Pool) {
	g.GET("/projects/:projectId/webhooks/:webhookId/deliveries", func(c echo.Context) error {
		lq, err := listq.Parse(c.QueryParams(), listq.Spec{DefaultLimit: 50, NoOrder: true})
		if err != nil {
			return err
		}
		ds, err := listDeliveries(c.Request().Context(), pool, c.Param("projectId"), c.Param("webhookId"), lq)
		if err != nil {
			return err
		}
		page, more, next := listq.Page(ds, lq.Limit, func(d Delivery) string { return d.ID })
		return c.JSON(http.StatusOK, listq.List[Delivery]{Data: page, More: more, Next: next})
	})
}

// listDeliveries reads a page of a webhook's deliveries (limit+1), then, in
// one more round trip, their attempts and, from the outbox, their tasks'
// states: a delivery whose task was parked has failed.
func listDeliveries(ctx context.Context, pool *db.Pool, projectID, webhookID string, lq listq.Query) ([]Delivery, error) {
	cond, orderBy, args := lq.Keyset("webhook_deliveries", "id", []any{projectID, webhookID, lq.Limit + 1})
	rows, err := pool.Query(ctx, `SELECT id, webhook_id, event_id, event_type, target_url, status, last_status_code,
			created_at, finished_at
		FROM webhook_deliveries WHERE project_id = $1 AND webhook_id = $2`+cond+` ORDER BY `+orderBy+` LIMIT $3`, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		var created time.Time
		var finished *time.Time
		err := r.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.EventType, &d.TargetURL, &d.Status, &d.LastStatusCode, &created, &finished)
		d.CreatedAt, d.FinishedAt, d.Object, d.Attempts = jsonx.Time{Time: created}, jsonx.Ptr(finished), "webhook_delivery", []Attempt{}
		return d, err
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	byID := map[string]*Delivery{}
	ids := make([]string, len(out))
	for i := range out {
		byID[out[i].ID] = &out[i]
		ids[i] = out[i].ID
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT delivery_id, attempt, status_code, error, duration_ms, at FROM webhook_attempts
		WHERE project_id = $1 AND delivery_id = ANY($2) ORDER BY delivery_id, attempt`, projectID, ids).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var a Attempt
				var at time.Time
				if err := rows.Scan(&id, &a.Attempt, &a.StatusCode, &a.Error, &a.DurationMS, &at); err != nil {
					return err
				}
				a.At = jsonx.Time{Time: at}
				byID[id].Attempts = append(byID[id].Attempts, a)
			}
			return rows.Err()
		})
	tasks := map[string]async.TaskState{}
	async.QueueTaskStates(b, projectID, ids, tasks)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	for i := range out {
		t, ok := tasks[out[i].ID]
		if !ok {
			continue
		}
		if t.Status == "parked" {
			out[i].Status = "failed"
		}
		if out[i].FinishedAt == nil && t.FinishedAt != nil {
			out[i].FinishedAt = jsonx.Ptr(t.FinishedAt)
		}
	}
	return out, nil
}
