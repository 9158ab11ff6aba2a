package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// newWebhookSecret is a Standard Webhooks secret: "whsec_" and 32 random
// bytes in base64. The whole string is also the key of X-Voucherify-Signature.
func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// GetPlan returns a plan.
func GetPlan(ctx context.Context, q db.Querier, name string) (Plan, error) {
	var p Plan
	var features []byte
	var share *float64
	err := q.QueryRow(ctx, `SELECT name, features, requests_per_minute, requests_per_hour, cluster_share FROM plans WHERE name = $1`,
		name).Scan(&p.Name, &features, &p.RequestsPerMinute, &p.RequestsPerHour, &share)
	p.ClusterShare = DefaultClusterShare
	if share != nil {
		p.ClusterShare = *share
	}
	if errors.Is(err, db.ErrNotFound) {
		return Plan{}, ErrPlanNotFound
	}
	if err != nil {
		return Plan{}, err
	}
	return p, json.Unmarshal(features, &p.Features)
}

// ListPlans returns every plan by name.
func ListPlans(ctx context.Context, q db.Querier) ([]Plan, error) {
	rows, err := q.Query(ctx, `SELECT name, features, requests_per_minute, requests_per_hour, cluster_share FROM plans ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Plan, error) {
		var p Plan
		var features []byte
		var share *float64
		if err := r.Scan(&p.Name, &features, &p.RequestsPerMinute, &p.RequestsPerHour, &share); err != nil {
			return p, err
		}
		p.ClusterShare = DefaultClusterShare
		if share != nil {
			p.ClusterShare = *share
		}
		return p, json.Unmarshal(features, &p.Features)
	})
}

// PutPlan creates or redefines a plan.
func PutPlan(ctx context.Context, q db.Querier, p Plan) error {
	if p.Features == nil {
		p.Features = []string{}
	}
	features, _ := json.Marshal(p.Features)
	var share *float64
	if p.ClusterShare > 0 {
		share = &p.ClusterShare
	}
	if _, err := q.Exec(ctx, `INSERT INTO plans (name, features, requests_per_minute, requests_per_hour, cluster_share)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET features = excluded.features, requests_per_minute = excluded.requests_per_minute,
		requests_per_hour = excluded.requests_per_hour, cluster_share = excluded.cluster_share`,
		p.Name, features, p.RequestsPerMinute, p.RequestsPerHour, share); err != nil {
		return err
	}
	return RecordChange(ctx, q, ChangePlan, p.Name)
}

// RotateWebhookSecret gives a project a new webhook secret; the old one keeps
// signing alongside it for a day.
func RotateWebhookSecret(ctx context.Context, q db.Querier, projectID string) (Project, error) {
	if err := writeOne(ctx, q, ErrProjectNotFound, Change{Kind: ChangeProject, Key: projectID},
		`UPDATE projects SET webhook_secret_previous = webhook_secret, webhook_secret = $2,
		webhook_secret_rotated_at = now(), updated_at = now() WHERE id = $1 AND deleted_at IS NULL`, projectID, newWebhookSecret()); err != nil {
		return Project{}, err
	}
	return GetProject(ctx, q, projectID)
}

// SigningSecrets are the secrets a webhook is signed with now: the current
// one, and the previous one for a day after a rotation.
func (p Project) SigningSecrets(now time.Time) []string {
	s := []string{p.WebhookSecret}
	if p.WebhookSecretPrevious != nil && p.WebhookSecretRotated != nil && now.Sub(*p.WebhookSecretRotated) < 24*time.Hour {
		s = append(s, *p.WebhookSecretPrevious)
	}
	return s
}

const webhookColumns = `project_id, id, target_url, events, active, created_at, updated_at`

func scanWebhook(r pgx.Row) (Webhook, error) {
	var w Webhook
	var events []byte
	if err := r.Scan(&w.ProjectID, &w.ID, &w.TargetURL, &events, &w.Active, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return w, err
	}
	return w, json.Unmarshal(events, &w.Events)
}

// CreateWebhook stores a webhook configuration (its ID is assigned).
func CreateWebhook(ctx context.Context, q db.Querier, w *Webhook) error {
	w.ID = ids.New("wh_")
	w.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	events, _ := json.Marshal(w.Events)
	if _, err := q.Exec(ctx, `INSERT INTO webhooks (project_id, id, target_url, events, active, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, w.ProjectID, w.ID, w.TargetURL, events, w.Active, w.CreatedAt); err != nil {
		return err
	}
	return RecordChange(ctx, q, ChangeWebhooks, w.ProjectID)
}

// GetWebhook returns a project's live webhook.
func GetWebhook(ctx context.Context, q db.Querier, projectID, id string) (Webhook, error) {
	w, err := scanWebhook(q.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return Webhook{}, ErrWebhookNotFound
	}
	return w, err
}

// ListWebhooks returns a project's live webhooks, oldest first.
func ListWebhooks(ctx context.Context, q db.Querier, projectID string) ([]Webhook, error) {
	rows, err := q.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE project_id = $1 AND deleted_at IS NULL ORDER BY id`,
		projectID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Webhook, error) { return scanWebhook(r) })
}

// UpdateWebhook writes a webhook's target, events and active flag.
func UpdateWebhook(ctx context.Context, q db.Querier, w *Webhook) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	events, _ := json.Marshal(w.Events)
	if err := writeOne(ctx, q, ErrWebhookNotFound, Change{Kind: ChangeWebhooks, Key: w.ProjectID},
		`UPDATE webhooks SET target_url = $3, events = $4, active = $5, updated_at = $6
		WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL`, w.ProjectID, w.ID, w.TargetURL, events, w.Active, now); err != nil {
		return err
	}
	w.UpdatedAt = &now
	return nil
}

// DeleteWebhook removes a webhook configuration; its pending deliveries stop.
func DeleteWebhook(ctx context.Context, q db.Querier, projectID, id string) error {
	return writeOne(ctx, q, ErrWebhookNotFound, Change{Kind: ChangeWebhooks, Key: projectID},
		`UPDATE webhooks SET deleted_at = now() WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL`, projectID, id)
}
