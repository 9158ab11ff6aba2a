package webhooks

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
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

// Delivery is a notice's delivery to one webhook, with its attempts.
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
		return httpx.WithList(c, listq.Spec{DefaultLimit: 50, NoOrder: true}, func(lq listq.Query) (any, error) {
			ds, err := listDeliveries(c.Request().Context(), pool, c.Param("projectId"), c.Param("webhookId"), lq)
			if err != nil {
				return nil, err
			}
			page, more, next := listq.Page(ds, lq.Limit, func(d Delivery) string { return d.ID })
			return listq.List[Delivery]{Data: page, More: more, Next: next}, nil
		})
	})
}
