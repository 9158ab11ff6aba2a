package promotions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
)

// Promotion stacks: named groups of a campaign's tiers, kept in
// promotion_stacks.

// StackRequest is the body of POST and PUT /v1/promotions/{campaignId}/stacks[/{id}].
type StackRequest struct {
	Name  *string `json:"name"`
	Tiers *struct {
		IDs           []string `json:"ids"`
		HierarchyMode *string  `json:"hierarchy_mode"`
	} `json:"tiers"`
	CategoryID *string `json:"category_id"`
}

// stackAttrs are a stack's properties kept as a document.
type stackAttrs struct {
	IDs           []string `json:"ids"`
	HierarchyMode string   `json:"hierarchy_mode"`
	CategoryID    *string  `json:"category_id,omitempty"`
}

func stackView(id, campaignID, name string, a stackAttrs, created time.Time, updated *time.Time) map[string]any {
	return map[string]any{"id": id, "name": name, "tiers": map[string]any{"ids": a.IDs, "hierarchy_mode": a.HierarchyMode},
		"created_at": jsonx.Time{Time: created}, "updated_at": jsonx.Ptr(updated), "campaign_id": campaignID,
		"category_id": a.CategoryID, "categories": []any{}, "object": "promotion_stack"}
}

func scanStack(r pgx.Row) (map[string]any, error) {
	var id, campaignID, name string
	var raw []byte
	var created time.Time
	var updated *time.Time
	if err := r.Scan(&id, &campaignID, &name, &raw, &created, &updated); err != nil {
		return nil, err
	}
	var a stackAttrs
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	return stackView(id, campaignID, name, a, created, updated), nil
}

const stackColumns = `id, campaign_id, name, attrs, created_at, updated_at`

func (s *Service) getStack(ctx context.Context, ref campaigns.ItemRef) (map[string]any, error) {
	c, err := promotion(ctx, s.pool, ref.Project, ref.Campaign, false)
	if err != nil {
		return nil, err
	}
	v, err := scanStack(s.pool.QueryRow(ctx, `SELECT `+stackColumns+` FROM promotion_stacks WHERE project_id = $1 AND campaign_id = $2 AND id = $3`,
		ref.Project, c.ID, ref.ID))
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("promotion_stack", ref.ID)
	}
	return v, err
}

// writeStack creates (ref.ID "") or updates a stack of a campaign's tiers:
// every tier named must be the campaign's. An update is partial, as the
// reference's body requires nothing: what it does not send is kept.
func (s *Service) writeStack(ctx context.Context, ref campaigns.ItemRef, r StackRequest) (map[string]any, error) {
	projectID, id := ref.Project, ref.ID
	if r.Name != nil && (strings.TrimSpace(*r.Name) == "" || len(*r.Name) > 200) || r.Name == nil && id == "" {
		return nil, apierr.InvalidPayload("name is required: 1 to 200 characters")
	}
	newIDs := r.Tiers != nil && r.Tiers.IDs != nil
	if newIDs && (len(r.Tiers.IDs) == 0 || len(r.Tiers.IDs) > 30) || !newIDs && id == "" {
		return nil, apierr.InvalidPayload("tiers.ids is required: 1 to 30 of the campaign's promotion tiers")
	}
	if r.Tiers != nil && r.Tiers.HierarchyMode != nil && *r.Tiers.HierarchyMode != "MANUAL" {
		return nil, apierr.InvalidPayload("tiers.hierarchy_mode must be MANUAL")
	}
	var out map[string]any
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := promotion(ctx, tx, projectID, ref.Campaign, false)
		if err != nil {
			return err
		}
		a := stackAttrs{HierarchyMode: "MANUAL"}
		var name string
		var created time.Time
		if id != "" {
			var raw []byte
			err := tx.QueryRow(ctx, `SELECT name, attrs, created_at FROM promotion_stacks WHERE project_id = $1 AND campaign_id = $2 AND id = $3 FOR UPDATE`,
				projectID, c.ID, id).Scan(&name, &raw, &created)
			if errors.Is(err, db.ErrNotFound) {
				return apierr.NotFound("promotion_stack", id)
			} else if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return err
			}
		}
		if r.Name != nil {
			name = *r.Name
		}
		if r.CategoryID != nil {
			a.CategoryID = r.CategoryID
		}
		if newIDs {
			a.IDs = r.Tiers.IDs
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM promotion_tiers WHERE project_id = $1 AND campaign_id = $2 AND id = ANY($3::TEXT[])`,
				projectID, c.ID, a.IDs).Scan(&n); err != nil {
				return err
			}
			if n != len(a.IDs) {
				return apierr.InvalidPayload("tiers.ids must name distinct promotion tiers of campaign " + c.ID)
			}
		}
		raw, _ := json.Marshal(a)
		now := s.now()
		if id == "" {
			id = ids.New("stack_")
			_, err = tx.Exec(ctx, `INSERT INTO promotion_stacks (project_id, `+stackColumns+`) VALUES ($1, $2, $3, $4, $5, $6, NULL)`,
				projectID, id, c.ID, name, raw, now)
			out = stackView(id, c.ID, name, a, now, nil)
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE promotion_stacks SET name = $4, attrs = $5, updated_at = $6
			WHERE project_id = $1 AND campaign_id = $2 AND id = $3`, projectID, c.ID, id, name, raw, now)
		out = stackView(id, c.ID, name, a, created, &now)
		return err
	})
	return out, err
}

// deleteStack deletes a stack of a campaign.
func (s *Service) deleteStack(ctx context.Context, ref campaigns.ItemRef) error {
	if _, err := s.getStack(ctx, ref); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM promotion_stacks WHERE project_id = $1 AND id = $2`, ref.Project, ref.ID)
	return err
}

// StackFilter bounds the stacks listed by their creation and update times
// (exclusive).
type StackFilter struct {
	CreatedAfter, CreatedBefore, UpdatedAfter, UpdatedBefore *time.Time
}

var stackSortKeys = map[string]string{"created_at": "id", "updated_at": "COALESCE(updated_at, created_at)", "name": "name"}

// ListStacks returns a page of the stacks of live campaigns, of
// campaignKey's (id or name) when given, their number, and whether more
// follow (and the cursor to them).
func (s *Service) ListStacks(ctx context.Context, projectID, campaignKey string, f StackFilter, lq listq.Query) ([]map[string]any, int, bool, string, error) {
	where, args := ` WHERE project_id = $1 AND campaign_id IN `+campaigns.LiveIDs, []any{projectID}
	if campaignKey != "" {
		k, err := promotion(ctx, s.pool, projectID, campaignKey, false)
		if err != nil {
			return nil, 0, false, "", err
		}
		where, args = where+" AND campaign_id = $2", append(args, k.ID)
	}
	for _, t := range []struct {
		sql string
		v   *time.Time
	}{{"created_at > $%d", f.CreatedAfter}, {"created_at < $%d", f.CreatedBefore},
		{"COALESCE(updated_at, created_at) > $%d", f.UpdatedAfter}, {"COALESCE(updated_at, created_at) < $%d", f.UpdatedBefore}} {
		if t.v != nil {
			args = append(args, *t.v)
			where += fmt.Sprintf(" AND "+t.sql, len(args))
		}
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM promotion_stacks`+where, args...).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	args = append(args, lq.Limit+1)
	limit := fmt.Sprintf("$%d", len(args))
	cond, orderBy, args := lq.Keyset("promotion_stacks", stackSortKeys[lq.Key], args)
	rows, err := db.Collect(scanStack)(s.pool.Query(ctx, `SELECT `+stackColumns+` FROM promotion_stacks`+where+cond+
		` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	page, more, next := listq.Page(rows, lq.Limit, func(v map[string]any) string { return v["id"].(string) })
	return page, total, more, next, nil
}
