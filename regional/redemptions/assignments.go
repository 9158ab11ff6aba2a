package redemptions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
)

// Assignment offers a reward in a loyalty program at a price in points
// (a COIN reward is priced by its ratio instead).
type Assignment struct {
	ID         string
	RewardID   string
	CampaignID string
	Points     *int64
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// AssignmentView is the reference shape of a reward assignment.
type AssignmentView struct {
	ID                string      `json:"id"`
	RewardID          string      `json:"reward_id"`
	CreatedAt         jsonx.Time  `json:"created_at"`
	UpdatedAt         *jsonx.Time `json:"updated_at"`
	Object            string      `json:"object"`
	RelatedObjectID   string      `json:"related_object_id"`
	RelatedObjectType string      `json:"related_object_type"`
	Parameters        struct {
		Loyalty struct {
			Points *int64 `json:"points"`
		} `json:"loyalty"`
	} `json:"parameters"`
}

// View renders the assignment.
func (a Assignment) View() AssignmentView {
	v := AssignmentView{ID: a.ID, RewardID: a.RewardID, CreatedAt: jsonx.Time{Time: a.CreatedAt}, UpdatedAt: jsonx.Ptr(a.UpdatedAt),
		Object: "reward_assignment", RelatedObjectID: a.CampaignID, RelatedObjectType: "campaign"}
	v.Parameters.Loyalty.Points = a.Points
	return v
}

const assignmentColumns = `id, reward_id, campaign_id, points, created_at, updated_at`

func scanAssignment(r pgx.Row) (Assignment, error) {
	var a Assignment
	err := r.Scan(&a.ID, &a.RewardID, &a.CampaignID, &a.Points, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

// RewardIDs are the rewards a campaign offers (the tiers' Terms).
func (s *Service) RewardIDs(ctx context.Context, q db.Querier, projectID, campaignID string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT reward_id FROM reward_assignments WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return set, err
}

// AssignmentRequest is one item of POST /v1/loyalties/{campaignId}/rewards.
type AssignmentRequest struct {
	Reward     string `json:"reward"`
	Parameters *struct {
		Loyalty *struct {
			Points *int64 `json:"points"`
		} `json:"loyalty"`
	} `json:"parameters"`
}

func (r AssignmentRequest) points() *int64 {
	if r.Parameters == nil || r.Parameters.Loyalty == nil {
		return nil
	}
	return r.Parameters.Loyalty.Points
}

// checkPrice checks an assignment's price for a reward of type typ.
func checkPrice(at, typ string, points *int64) error {
	if typ == rewards.Coin {
		if points != nil {
			return apierr.InvalidPayload(at + "parameters.loyalty.points: a COIN reward is priced by its exchange ratio, not in points")
		}
		return nil
	}
	if points == nil || *points < 1 || *points > 1_000_000_000 {
		return apierr.InvalidPayload(at + "parameters.loyalty.points is required: the reward's price, 1 to 1000000000 points")
	}
	return nil
}

// CreateAssignments offers rewards in a campaign, all or none.
func (s *Service) CreateAssignments(ctx context.Context, projectID, campaignID string, rs []AssignmentRequest) ([]AssignmentView, error) {
	if len(rs) == 0 || len(rs) > 100 {
		return nil, apierr.InvalidPayload("the body is 1 to 100 assignments: {\"reward\": …, \"parameters\": {\"loyalty\": {\"points\": …}}}")
	}
	var out []AssignmentView
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		camp, err := s.prog.Campaign(ctx, tx, projectID, campaignID)
		if err != nil {
			return err
		}
		now := s.Now()
		for i, r := range rs {
			at := ""
			if len(rs) > 1 {
				at = fmt.Sprintf("[%d].", i)
			}
			if r.Reward == "" {
				return apierr.InvalidPayload(at + "reward is required: the id of the reward to offer")
			}
			w, err := rewards.Get(ctx, tx, projectID, r.Reward)
			if err != nil {
				return err
			}
			if err := checkPrice(at, w.Type, r.points()); err != nil {
				return err
			}
			a := Assignment{ID: ids.New("rewa_"), RewardID: w.ID, CampaignID: camp.ID, Points: r.points(), CreatedAt: now}
			_, err = tx.Exec(ctx, `INSERT INTO reward_assignments (project_id, `+assignmentColumns+`) VALUES ($1, $2, $3, $4, $5, $6, NULL)`,
				projectID, a.ID, a.RewardID, a.CampaignID, a.Points, a.CreatedAt)
			if errors.Is(err, db.ErrConflict) {
				return apierr.Duplicate("reward_assignment", fmt.Sprintf("reward %s is already assigned to campaign %s", w.ID, camp.ID))
			}
			if err != nil {
				return err
			}
			out = append(out, a.View())
		}
		return nil
	})
	return out, err
}

// assignmentRows are a campaign's reward assignments.
var assignmentRows = loyalty.NewCampaignPart("reward_assignments", assignmentColumns, "reward_assignment", scanAssignment)

// UpdateAssignment changes an assignment's price.
func (s *Service) UpdateAssignment(ctx context.Context, ref campaigns.ItemRef, r AssignmentRequest) (AssignmentView, error) {
	projectID := ref.Project
	var out Assignment
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := assignmentRows.Get(ctx, s.prog, tx, ref, true)
		if err != nil {
			return err
		}
		w, err := rewards.Get(ctx, tx, projectID, a.RewardID)
		if err != nil {
			return err
		}
		if err := checkPrice("", w.Type, r.points()); err != nil {
			return err
		}
		now := s.Now()
		a.Points, a.UpdatedAt = r.points(), &now
		out = a
		_, err = tx.Exec(ctx, `UPDATE reward_assignments SET points = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`,
			projectID, a.ID, a.Points, now)
		return err
	})
	return out.View(), err
}

// DeleteAssignment withdraws a reward from a campaign.
func (s *Service) DeleteAssignment(ctx context.Context, ref campaigns.ItemRef) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := assignmentRows.Get(ctx, s.prog, tx, ref, true)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM reward_assignments WHERE project_id = $1 AND id = $2`, ref.Project, a.ID)
		return err
	})
}

// ListAssignments returns a page of the assignments of campaign
// ref.Campaign. With ref.ID, only that assignment (none if it is another
// campaign's).
func (s *Service) ListAssignments(ctx context.Context, ref campaigns.ItemRef, lq listq.Query) ([]AssignmentView, int, bool, string, error) {
	camp, err := s.prog.Campaign(ctx, s.pool, ref.Project, ref.Campaign)
	if err != nil {
		return nil, 0, false, "", err
	}
	where, args := ` WHERE project_id = $1 AND campaign_id = $2`, []any{ref.Project, camp.ID}
	if ref.ID != "" {
		where += ` AND id = $3`
		args = append(args, ref.ID)
	}
	return s.assignmentPage(ctx, where, args, lq)
}

// assignmentPage is a page of the assignments where (a WHERE clause on
// reward_assignments with its args) picks, and their total.
func (s *Service) assignmentPage(ctx context.Context, where string, args []any, lq listq.Query) ([]AssignmentView, int, bool, string, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM reward_assignments`+where, args...).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	args = append(args, lq.Limit+1)
	limit := fmt.Sprintf("$%d", len(args))
	cond, orderBy, args := lq.Keyset("reward_assignments", "id", args)
	as, err := db.Collect(scanAssignment)(s.pool.Query(ctx, `SELECT `+assignmentColumns+` FROM reward_assignments`+where+cond+
		` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(as, lq.Limit, func(a Assignment) string { return a.ID }, Assignment.View)
	return out, total, more, next, nil
}

func registerAssignments(g *echo.Group, h Handler) {
	g.POST("/loyalties/:campaignId/rewards", h.createAssignments)
	g.GET("/loyalties/:campaignId/rewards", h.listAssignments)
	g.GET("/loyalties/:campaignId/rewards/:assignmentId", h.getAssignment)
	g.PUT("/loyalties/:campaignId/rewards/:assignmentId", h.updateAssignment)
	g.DELETE("/loyalties/:campaignId/rewards/:assignmentId", h.deleteAssignment)
}

// createAssignments takes one assignment or a list (the reference's
// body), all made or none, and answers one reward assignment, the first
// item's: the reference's response schema is one RewardAssignment, which
// a client generated from it (the official Python SDK) reads and a list
// fails. The others are read back from GET /v1/loyalties/{id}/rewards
// (docs/architecture.md, Rewards).
func (h Handler) createAssignments(c echo.Context) error {
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return err
	}
	var rs []AssignmentRequest
	list := bytes.HasPrefix(bytes.TrimSpace(raw), []byte("["))
	if list {
		if err := json.Unmarshal(raw, &rs); err != nil {
			return apierr.InvalidPayload("the body is a list of assignments: [{\"reward\": …, \"parameters\": {\"loyalty\": {\"points\": …}}}]")
		}
	} else {
		// One object is Tally's shorthand for a list of one; anything
		// else is not what the reference's array route takes.
		if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			return httpx.ArrayError(raw, "assignments")
		}
		var r AssignmentRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			return apierr.InvalidPayload("the body is an assignment: {\"reward\": …, \"parameters\": {\"loyalty\": {\"points\": …}}}")
		}
		rs = []AssignmentRequest{r}
	}
	vs, err := h.svc.CreateAssignments(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), rs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, vs[0])
}

func (h Handler) listAssignments(c echo.Context) error {
	return httpx.WithList(c, listq.Spec{NoOrder: true, Pages: true}, func(lq listq.Query) (any, error) {
		ref := campaigns.ItemRef{Project: httpx.ProjectID(c), Campaign: c.Param("campaignId"), ID: c.QueryParam("assignment_id")}
		vs, total, more, next, err := h.svc.ListAssignments(c.Request().Context(), ref, lq)
		return listq.List[AssignmentView]{Data: vs, Total: &total, More: more, Next: next}, err
	})
}

func (h Handler) getAssignment(c echo.Context) error {
	a, err := assignmentRows.Get(c.Request().Context(), h.svc.prog, h.svc.pool, campaigns.ItemRefOf(c, "assignmentId"), false)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.View())
}

func (h Handler) updateAssignment(c echo.Context) error {
	return httpx.WithBody(c, func(r AssignmentRequest) (any, error) {
		return h.svc.UpdateAssignment(c.Request().Context(), campaigns.ItemRefOf(c, "assignmentId"), r)
	})
}

func (h Handler) deleteAssignment(c echo.Context) error {
	if err := h.svc.DeleteAssignment(c.Request().Context(), campaigns.ItemRefOf(c, "assignmentId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// QueueDropOfReward queues onto b the deletion of a reward's assignments,
// for the rewards package when the reward goes (rewards.Assignments).
func (s *Service) QueueDropOfReward(b *pgx.Batch, projectID, rewardID string) {
	b.Queue(`DELETE FROM reward_assignments WHERE project_id = $1 AND reward_id = $2`, projectID, rewardID)
}

// RewardOf is the reward an assignment assigns, "" when there is no such
// assignment (rewards.Assignments).
func (s *Service) RewardOf(ctx context.Context, q db.Querier, projectID, assignmentID string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT reward_id FROM reward_assignments WHERE project_id = $1 AND id = $2`, projectID, assignmentID).Scan(&id)
	if errors.Is(err, db.ErrNotFound) {
		return "", nil
	}
	return id, err
}
