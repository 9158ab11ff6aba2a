package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/listq"
)

const columns = `id, name, description, campaign_type, source, body, rules, carried, created_at, updated_at`

func scan(row pgx.Row) (Template, error) {
	var t Template
	var body, rules, carried []byte
	err := row.Scan(&t.ID, &t.Name, &t.Description, &t.CampaignType, &t.Source, &body, &rules, &carried, &t.CreatedAt, &t.UpdatedAt)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(body, &t.Body); err != nil {
		return t, err
	}
	if carried != nil {
		if err := json.Unmarshal(carried, &t.Carried); err != nil {
			return t, err
		}
	}
	return t, json.Unmarshal(rules, &t.Rules)
}

func get(ctx context.Context, q db.Querier, projectID, id string) (Template, error) {
	t, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM campaign_templates WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return t, apierr.NotFound("campaign_template", id)
	}
	return t, err
}

func nameTaken(err error, name string) error {
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("campaign_template", fmt.Sprintf("A campaign template named %q exists already; a template's name is unique in the project.", name))
	}
	return err
}

func insert(ctx context.Context, q db.Querier, projectID string, t Template) error {
	body, _ := json.Marshal(t.Body)
	rules, _ := json.Marshal(t.Rules)
	var carried []byte
	if len(t.Carried) > 0 {
		carried, _ = json.Marshal(t.Carried)
	}
	_, err := q.Exec(ctx, `INSERT INTO campaign_templates (project_id, `+columns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		projectID, t.ID, t.Name, t.Description, t.CampaignType, t.Source, body, rules, carried, t.CreatedAt, t.UpdatedAt)
	return nameTaken(err, t.Name)
}

func rename(ctx context.Context, q db.Querier, projectID string, t Template) error {
	_, err := q.Exec(ctx, `UPDATE campaign_templates SET name = $3, description = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
		projectID, t.ID, t.Name, t.Description, t.UpdatedAt)
	return nameTaken(err, t.Name)
}

func remove(ctx context.Context, q db.Querier, projectID, id string) error {
	tag, err := q.Exec(ctx, `DELETE FROM campaign_templates WHERE project_id = $1 AND id = $2`, projectID, id)
	if err == nil && tag.RowsAffected() == 0 {
		return apierr.NotFound("campaign_template", id)
	}
	return err
}

// list reads a page of the templates f lets through by id (the
// reference's order id or -id) after the cursor, limit+1 rows so the
// caller knows whether more follow.
func list(ctx context.Context, q db.Querier, projectID string, lq listq.Query, f filters.Filter, now time.Time) ([]Template, error) {
	op, dir := ">", "ASC"
	if lq.Desc {
		op, dir = "<", "DESC"
	}
	args := []any{projectID, lq.Limit + 1}
	where := ""
	if lq.After != "" {
		args = append(args, lq.After)
		where = " AND id " + op + " $3"
	}
	cond, args := f.SQL(listFields, args, now)
	return db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM campaign_templates WHERE project_id = $1`+where+
		` AND `+cond+` ORDER BY id `+dir+` LIMIT $2`, args...))
}

func count(ctx context.Context, q db.Querier, projectID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM campaign_templates WHERE project_id = $1`, projectID).Scan(&n)
	return n, err
}
