package webhooks

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
)

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
