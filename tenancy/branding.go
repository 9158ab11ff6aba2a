package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tallyhq/tally/internal/db"
)

// ErrBrandingNotFound: the project has no branding, or not that one.
var ErrBrandingNotFound = errors.New("tenancy: branding not found")

// Branding is a project's one branding: its sections (brand, address,
// contact), each of named texts, as the reference shapes them.
type Branding struct {
	ID        string
	Doc       map[string]map[string]*string
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// GetBranding reads a project's branding.
func GetBranding(ctx context.Context, q db.Querier, projectID string) (Branding, error) {
	var b Branding
	var doc []byte
	err := q.QueryRow(ctx, `SELECT id, doc, created_at, updated_at FROM project_brandings WHERE project_id = $1`, projectID).
		Scan(&b.ID, &doc, &b.CreatedAt, &b.UpdatedAt)
	if errors.Is(err, db.ErrNotFound) {
		return b, ErrBrandingNotFound
	}
	if err != nil {
		return b, err
	}
	return b, json.Unmarshal(doc, &b.Doc)
}

// PutBranding writes a project's branding: a new one (insert, a conflict
// where it has one) or its change.
func PutBranding(ctx context.Context, q db.Querier, projectID string, b Branding, insert bool) error {
	doc, err := json.Marshal(b.Doc)
	if err != nil {
		return err
	}
	if insert {
		_, err = q.Exec(ctx, `INSERT INTO project_brandings (project_id, id, doc, created_at) VALUES ($1, $2, $3, $4)`,
			projectID, b.ID, doc, b.CreatedAt)
		return err
	}
	_, err = q.Exec(ctx, `UPDATE project_brandings SET doc = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`,
		projectID, b.ID, doc, b.UpdatedAt)
	return err
}

// DeleteBranding removes a project's branding.
func DeleteBranding(ctx context.Context, q db.Querier, projectID, id string) error {
	// No cache holds a branding (only management reads it), so no change is
	// logged.
	tag, err := q.Exec(ctx, `DELETE FROM project_brandings WHERE project_id = $1 AND id = $2`, projectID, id)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrBrandingNotFound
	}
	return err
}
