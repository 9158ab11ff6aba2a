package stacked

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
)

// history serves GET /v1/vouchers/{code}/redemption, a voucher's (or gift
// card's, or loyalty card's payments') redemption history as the
// reference shapes it: its redemptions, successful or not, each with its
// present status, and the rollbacks of them, newest first, unpaged (the
// reference's answer has no paging; the JS SDK's redemptions.getForVoucher
// reads it whole).
func (s *Service) history(c echo.Context) error {
	ctx, projectID, code := c.Request().Context(), httpx.ProjectID(c), c.Param("code")
	v, err := s.Vouchers.Get(ctx, projectID, code)
	if err != nil {
		return err
	}
	entries, err := voucherEntries(ctx, s.Pool, projectID, v.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"quantity": v.Redemption.Quantity, "redeemed_quantity": v.Redemption.RedeemedQuantity,
		"object": "list", "url": "/v1/vouchers/" + url.PathEscape(v.Code) + "/redemption", "data_ref": "redemption_entries",
		"total": len(entries), "redemption_entries": entries})
}

// voucherEntries are a redeemable's redemptions (the children of stacked
// redemptions that name it) and their rollbacks, newest first, along the
// index on the redeemed object.
func voucherEntries(ctx context.Context, q db.Querier, projectID, objectID string) ([]map[string]any, error) {
	rs, err := db.Collect(scanRedemption)(q.Query(ctx, `SELECT `+redemptionColumns+` FROM stacked_redemptions
		WHERE project_id = $1 AND object_id = $2 AND parent_id IS NOT NULL`, projectID, objectID))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rs))
	for i, x := range rs {
		ids[i] = x.ID
	}
	rbs, err := rollbacksOf(ctx, q, projectID, ids)
	if err != nil {
		return nil, err
	}
	type entry struct {
		at time.Time
		id string
		v  map[string]any
	}
	out := make([]entry, 0, len(rs)+len(rbs))
	for _, x := range rs {
		out = append(out, entry{x.CreatedAt, x.ID, current(x, rbs[x.ID])})
	}
	rows, err := q.Query(ctx, `SELECT id, view, created_at FROM stacked_rollbacks WHERE project_id = $1 AND redemption_id = ANY($2::TEXT[])`,
		projectID, ids)
	if err != nil {
		return nil, err
	}
	var id string
	var raw []byte
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &raw, &at}, func() error {
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		out = append(out, entry{at, id, v})
		return nil
	}); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.After(out[j].at)
		}
		return out[i].id > out[j].id
	})
	vs := make([]map[string]any, len(out))
	for i, e := range out {
		vs[i] = e.v
	}
	return vs, nil
}
