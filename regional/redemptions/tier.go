package redemptions

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
)

// TierReward is a reward a tier's members can buy, at the tier's price:
// the reference's loyalty_tier_reward.
type TierReward struct {
	Reward     rewards.View   `json:"reward"`
	Assignment AssignmentView `json:"assignment"`
	Object     string         `json:"object"`
}

// TierRewards lists the rewards a tier's program offers, oldest assignment
// first, each assignment's price as the tier maps the reward (GET
// /v1/loyalties/{campaignId}/tiers/{tierId}/rewards, unpaged as the
// reference has it): what a member of the tier pays, as the member's
// rewards and a redemption price it.
func (s *Service) TierRewards(ctx context.Context, ref campaigns.ItemRef) ([]TierReward, error) {
	camp, err := s.prog.Campaign(ctx, s.pool, ref.Project, ref.Campaign)
	if err != nil {
		return nil, err
	}
	tier, err := tiers.Find(ctx, s.pool, campaigns.ItemRef{Project: ref.Project, Campaign: camp.ID, ID: ref.ID})
	if err != nil {
		return nil, err
	}
	as, ws, err := s.offered(ctx, ref.Project, camp.ID)
	if err != nil {
		return nil, err
	}
	out := []TierReward{}
	for _, a := range as {
		w, ok := ws[a.RewardID]
		if !ok {
			continue
		}
		v := a.View()
		if m, ok := tier.RewardMapping(w.ID); ok && a.Points != nil && w.Type != rewards.Coin {
			v.Parameters.Loyalty.Points = ptr(m.Apply(*a.Points))
		}
		out = append(out, TierReward{Reward: w.View(), Assignment: v, Object: "loyalty_tier_reward"})
	}
	return out, nil
}

func registerTier(g *echo.Group, h Handler) {
	g.GET("/loyalties/:campaignId/tiers/:tierId/rewards", func(c echo.Context) error {
		rs, err := h.svc.TierRewards(c.Request().Context(), campaigns.ItemRefOf(c, "tierId"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data", "data": rs, "total": len(rs)})
	})
}
