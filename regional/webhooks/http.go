package webhooks

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
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
		q := c.QueryParams()
		limit, err := listq.Limit(q, 50)
		if err != nil {
			return err
		}
		ds, err := listDeliveries(c, pool, c.Param("projectId"), c.Param("webhookId"), q.Get("starting_after_id"), limit+1)
		if err != nil {
			return err
		}
		page, more, next := listq.Page(ds, limit, func(d Delivery) string { return d.ID })
		if page == nil {
			page = []Delivery{}
		}
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data", "data": page, "has_more": more,
			"more_starting_after": next})
	})
}

func listDeliveries(c echo.Context, pool *db.Pool, projectID, webhookID, after string, limit int) ([]Delivery, error) {
	ctx := c.Request().Context()
	rows, err := pool.Query(ctx, `
		SELECT d.id, d.webhook_id, d.event_id, d.event_type, d.target_url,
			CASE WHEN o.status = 'parked' THEN 'failed' ELSE d.status END,
			d.last_status_code, d.created_at, COALESCE(d.finished_at, o.finished_at)
		FROM webhook_deliveries d
		LEFT JOIN outbox o ON o.project_id = d.project_id AND o.id = d.id
		WHERE d.project_id = $1 AND d.webhook_id = $2 AND d.id > $3
		ORDER BY d.id LIMIT $4`, projectID, webhookID, after, limit)
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
	arows, err := pool.Query(ctx, `SELECT delivery_id, attempt, status_code, error, duration_ms, at FROM webhook_attempts
		WHERE project_id = $1 AND delivery_id = ANY($2) ORDER BY delivery_id, attempt`, projectID, ids)
	if err != nil {
		return nil, err
	}
	defer arows.Close()
	for arows.Next() {
		var id string
		var a Attempt
		var at time.Time
		if err := arows.Scan(&id, &a.Attempt, &a.StatusCode, &a.Error, &a.DurationMS, &at); err != nil {
			return nil, err
		}
		a.At = jsonx.Time{Time: at}
		byID[id].Attempts = append(byID[id].Attempts, a)
	}
	return out, arows.Err()
}
