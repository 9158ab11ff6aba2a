package stacked

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/redemptions"
)

// Register mounts the reads and rollbacks of redemptions on the /v1
// group. GET /v1/redemptions/{id} and POST …/rollback serve loyalty reward
// redemptions (regional/redemptions) too: this package answers for its
// own ids and hands the rest over.
func Register(g *echo.Group, s *Service) {
	g.GET("/redemptions", s.list)
	g.GET("/vouchers/:code/redemption", s.history)
	g.GET("/redemptions/:redemptionId", s.get)
	g.POST("/redemptions/:redemptionId/rollback", s.rollback(false))
	g.POST("/redemptions/:redemptionId/rollbacks", s.rollback(true))
}

func (s *Service) get(c echo.Context) error {
	ctx, projectID, id := c.Request().Context(), httpx.ProjectID(c), c.Param("redemptionId")
	v, err := s.Get(ctx, projectID, id)
	if errors.Is(err, errNotStacked) {
		return httpx.Reply(c)(s.Redemptions.GetRedemption(ctx, projectID, id))
	}
	return httpx.Reply(c)(v, err)
}

func (s *Service) rollback(whole bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		var r redemptions.RollbackRequest
		if c.Request().ContentLength != 0 {
			if err := httpx.Bind(c, &r); err != nil {
				return err
			}
		}
		q := c.QueryParams()
		for _, p := range []struct {
			name string
			dst  **string
		}{{"reason", &r.Reason}, {"tracking_id", &r.TrackingID}} {
			if *p.dst == nil && q.Has(p.name) {
				v := q.Get(p.name)
				*p.dst = &v
			}
		}
		ctx, projectID, id := c.Request().Context(), httpx.ProjectID(c), c.Param("redemptionId")
		v, err := s.Rollback(ctx, projectID, id, r, whole)
		if errors.Is(err, errNotStacked) {
			if whole {
				return apierr.NotFound("redemption", id)
			}
			v, err = s.Redemptions.Rollback(ctx, projectID, id, r)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	}
}

// list serves GET /v1/redemptions: the stacked redemptions of every
// redeemable (not their parents) and the loyalty reward redemptions,
// newest first, with the reference's page and filters.
func (s *Service) list(c echo.Context) error {
	q := c.QueryParams()
	// Two sources merged in memory: numbered pages only (up to the
	// reference's 99), each source read up to the page's end.
	limit, err := listq.Limit(q, 10)
	if err != nil {
		return err
	}
	page, err := listq.PageNumber(q, 99, false)
	if err != nil {
		return err
	}
	f := redemptions.ListFilter{Result: q.Get("result"), CustomerID: q.Get("customer"), Limit: page * limit}
	switch f.Result {
	case "", "SUCCESS", "FAILURE":
	default:
		return apierr.InvalidQuery("result", "must be SUCCESS or FAILURE")
	}
	switch q.Get("order") {
	case "", "-created_at":
	case "created_at":
		f.Asc = true
	default:
		return apierr.InvalidQuery("order", "must be created_at or -created_at")
	}
	for _, b := range []struct {
		name string
		dst  **time.Time
	}{{"created_at[after]", &f.After}, {"created_at[before]", &f.Before}} {
		if v := q.Get(b.name); v != "" {
			t, err := parseWhen(v)
			if err != nil {
				return apierr.InvalidQuery(b.name, "must be a date-time or a date (ISO 8601)")
			}
			*b.dst = &t
		}
	}
	ctx, projectID := c.Request().Context(), httpx.ProjectID(c)
	if name := q.Get("campaign"); name != "" {
		k, err := campaigns.Get[json.RawMessage](ctx, s.Pool, projectID, name, false)
		if errors.Is(err, db.ErrNotFound) {
			return c.JSON(http.StatusOK, listOf(nil, 0, false))
		}
		if err != nil {
			return err
		}
		f.CampaignID = k.ID
	}
	views, times, theirs, err := s.Redemptions.ListViews(ctx, projectID, f)
	if err != nil {
		return err
	}
	mine, total, err := listStacked(ctx, s.Pool, projectID, f)
	if err != nil {
		return err
	}
	type row struct {
		at time.Time
		v  map[string]any
	}
	all := make([]row, 0, len(views)+len(mine))
	for i, v := range views {
		all = append(all, row{times[i], v})
	}
	for _, x := range mine {
		all = append(all, row{x.CreatedAt, current(x, "")})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if f.Asc {
			return all[i].at.Before(all[j].at)
		}
		return all[i].at.After(all[j].at)
	})
	from := min((page-1)*limit, len(all))
	to := min(from+limit, len(all))
	out := make([]any, 0, to-from)
	for _, r := range all[from:to] {
		out = append(out, r.v)
	}
	// has_more as the other lists say it (the reference's envelope here has
	// only total): rows of the filter follow this page's.
	return c.JSON(http.StatusOK, listOf(out, theirs+total, theirs+total > to))
}

func listOf(rs []any, total int, more bool) map[string]any {
	if rs == nil {
		rs = []any{}
	}
	return map[string]any{"object": "list", "data_ref": "redemptions", "redemptions": rs, "total": total, "has_more": more}
}

func parseWhen(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}
