package redemptions

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
)

// MemberReward is a reward a member's card can buy: the reference's
// loyalty_reward.
type MemberReward struct {
	Reward     rewards.View   `json:"reward"`
	Assignment AssignmentView `json:"assignment"`
	Object     string         `json:"object"`
}

// maxMemberRewards bounds the unpaged list: a campaign's assignments.
const maxMemberRewards = 1000

// MemberRewards lists the rewards the card's campaign offers, oldest
// assignment first; affordable keeps those the card's balance pays for
// now: a price (the assignment's points, mapped by the card's tier) at
// most the balance, a COIN reward's points_ratio at most the balance, and
// a unit in stock. (A tier maps a reward's price; it has no way to
// withdraw one, so no reward is hidden by tier.)
func (s *Service) MemberRewards(ctx context.Context, ref loyalty.CardRef, affordable bool) ([]MemberReward, error) {
	card, camp, err := s.prog.Card(ctx, s.pool, ref)
	if err != nil {
		return nil, err
	}
	as, ws, err := s.offered(ctx, ref.Project, camp.ID)
	if err != nil {
		return nil, err
	}
	tier := tiers.Of(camp.Tiers, card.Balance)
	out := []MemberReward{}
	for _, a := range as {
		w, ok := ws[a.RewardID]
		if !ok {
			continue
		}
		if affordable && !affords(card.Balance, w, a, tier) {
			continue
		}
		out = append(out, MemberReward{Reward: w.View(), Assignment: a.View(), Object: "loyalty_reward"})
	}
	return out, nil
}

// offered are the assignments of campaignID, oldest first (at most
// maxMemberRewards), and their rewards by id (an assignment whose reward
// is gone has none).
func (s *Service) offered(ctx context.Context, projectID, campaignID string) ([]Assignment, map[string]rewards.Reward, error) {
	as, err := db.Collect(scanAssignment)(s.pool.Query(ctx, `SELECT `+assignmentColumns+` FROM reward_assignments
		WHERE project_id = $1 AND campaign_id = $2 ORDER BY id LIMIT $3`, projectID, campaignID, maxMemberRewards))
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.RewardID
	}
	ws, err := rewards.ByIDs(ctx, s.pool, projectID, ids)
	return as, ws, err
}

// affords says whether balance pays for reward w as assignment a prices it
// for a member of tier.
func affords(balance int64, w rewards.Reward, a Assignment, tier *tiers.Tier) bool {
	if w.Stock != nil && w.Redeemed >= *w.Stock {
		return false
	}
	if w.Type == rewards.Coin {
		return w.Attrs.Parameters.Coin != nil && balance >= w.Attrs.Parameters.Coin.PointsRatio
	}
	if a.Points == nil {
		return false
	}
	price := *a.Points
	if m, ok := tier.RewardMapping(w.ID); ok {
		price = m.Apply(price)
	}
	return price <= balance
}

func registerMember(g *echo.Group, h Handler) {
	list := func(c echo.Context) error {
		affordable := false
		if v := c.QueryParam("affordable_only"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return apierr.New(http.StatusBadRequest, "invalid_query_params", "Invalid query params",
					"affordable_only must be true or false")
			}
			affordable = b
		}
		rs, err := h.svc.MemberRewards(c.Request().Context(), loyalty.CardRefOf(c), affordable)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data", "data": rs, "total": len(rs)})
	}
	g.GET("/loyalties/members/:memberId/rewards", list)
	g.GET("/loyalties/:campaignId/members/:memberId/rewards", list)
}
