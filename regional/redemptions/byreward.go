package redemptions

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/rewards"
)

// The same rewa_ assignments seen from their reward
// (/v1/rewards/{rewardId}/assignments[/{assignmentId}]) and from their
// campaign under the reference's other name
// (/v1/loyalties/{campaignId}/reward-assignments[/{assignmentId}[/reward]]):
// one table, one set of rules (CreateAssignments, UpdateAssignment,
// DeleteAssignment), several paths.

// RewardAssignmentRequest is the body of POST
// /v1/rewards/{rewardId}/assignments: one campaign and its price.
type RewardAssignmentRequest struct {
	Campaign   string `json:"campaign"`
	Parameters *struct {
		Loyalty *struct {
			Points *int64 `json:"points"`
		} `json:"loyalty"`
	} `json:"parameters"`
}

// rewardItem names an assignment the way a reward's path does:
// /v1/rewards/{rewardId}/assignments/{assignmentId}, in a project.
type rewardItem struct {
	Project, Reward, ID string
}

func rewardItemOf(c echo.Context) rewardItem {
	return rewardItem{Project: httpx.ProjectID(c), Reward: c.Param("rewardId"), ID: c.Param("assignmentId")}
}

// ofReward reads the assignment ref names (404 when the reward has no such
// assignment, or is not there).
func (s *Service) ofReward(ctx context.Context, q db.Querier, ref rewardItem) (Assignment, error) {
	if _, err := rewards.Get(ctx, q, ref.Project, ref.Reward); err != nil {
		return Assignment{}, err
	}
	a, err := scanAssignment(q.QueryRow(ctx, `SELECT `+assignmentColumns+` FROM reward_assignments
		WHERE project_id = $1 AND reward_id = $2 AND id = $3`, ref.Project, ref.Reward, ref.ID))
	if errors.Is(err, db.ErrNotFound) {
		return Assignment{}, apierr.NotFound("reward_assignment", ref.ID)
	}
	return a, err
}

// ListOfReward returns a page of a reward's assignments, oldest first.
func (s *Service) ListOfReward(ctx context.Context, projectID, rewardID string, lq listq.Query) ([]AssignmentView, int, bool, string, error) {
	if _, err := rewards.Get(ctx, s.pool, projectID, rewardID); err != nil {
		return nil, 0, false, "", err
	}
	return s.assignmentPage(ctx, ` WHERE project_id = $1 AND reward_id = $2`, []any{projectID, rewardID}, lq)
}

func registerByReward(g *echo.Group, h Handler) {
	s := h.svc
	g.GET("/rewards/:rewardId/assignments", func(c echo.Context) error {
		return httpx.WithList(c, listq.Spec{NoOrder: true, Pages: true}, func(lq listq.Query) (any, error) {
			vs, total, more, next, err := s.ListOfReward(c.Request().Context(), httpx.ProjectID(c), c.Param("rewardId"), lq)
			return listq.List[AssignmentView]{Data: vs, Total: &total, More: more, Next: next}, err
		})
	})
	g.POST("/rewards/:rewardId/assignments", func(c echo.Context) error {
		return httpx.WithBody(c, func(r RewardAssignmentRequest) (any, error) {
			if r.Campaign == "" {
				return nil, apierr.InvalidPayload("campaign is required: the loyalty program that offers the reward")
			}
			vs, err := s.CreateAssignments(c.Request().Context(), httpx.ProjectID(c), r.Campaign,
				[]AssignmentRequest{{Reward: c.Param("rewardId"), Parameters: r.Parameters}})
			if err != nil {
				return nil, err
			}
			return vs[0], nil
		})
	})
	g.GET("/rewards/:rewardId/assignments/:assignmentId", func(c echo.Context) error {
		a, err := s.ofReward(c.Request().Context(), s.pool, rewardItemOf(c))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, a.View())
	})
	g.PUT("/rewards/:rewardId/assignments/:assignmentId", func(c echo.Context) error {
		return httpx.WithBody(c, func(r AssignmentRequest) (any, error) {
			ctx, ref := c.Request().Context(), rewardItemOf(c)
			a, err := s.ofReward(ctx, s.pool, ref)
			if err != nil {
				return nil, err
			}
			return s.UpdateAssignment(ctx, campaigns.ItemRef{Project: ref.Project, Campaign: a.CampaignID, ID: a.ID}, r)
		})
	})
	g.DELETE("/rewards/:rewardId/assignments/:assignmentId", func(c echo.Context) error {
		ctx, ref := c.Request().Context(), rewardItemOf(c)
		a, err := s.ofReward(ctx, s.pool, ref)
		if err != nil {
			return err
		}
		if err := s.DeleteAssignment(ctx, campaigns.ItemRef{Project: ref.Project, Campaign: a.CampaignID, ID: a.ID}); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})

	// The campaign's view under the reference's other path.
	g.GET("/loyalties/:campaignId/reward-assignments", func(c echo.Context) error {
		return httpx.WithList(c, listq.Spec{NoOrder: true, Pages: true}, func(lq listq.Query) (any, error) {
			only := c.QueryParam("assignment_id")
			if only == "" {
				only = c.QueryParam("assignmentId") // the reference's spelling of this list's filter
			}
			ref := campaigns.ItemRef{Project: httpx.ProjectID(c), Campaign: c.Param("campaignId"), ID: only}
			vs, total, more, next, err := s.ListAssignments(c.Request().Context(), ref, lq)
			return listq.List[AssignmentView]{Data: vs, Total: &total, More: more, Next: next}, err
		})
	})
	g.GET("/loyalties/:campaignId/reward-assignments/:assignmentId", h.getAssignment)
	g.GET("/loyalties/:campaignId/reward-assignments/:assignmentId/reward", func(c echo.Context) error {
		ctx := c.Request().Context()
		a, err := assignmentRows.Get(ctx, s.prog, s.pool, campaigns.ItemRefOf(c, "assignmentId"), false)
		if err != nil {
			return err
		}
		w, err := rewards.Get(ctx, s.pool, httpx.ProjectID(c), a.RewardID)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, w.View())
	})
}
