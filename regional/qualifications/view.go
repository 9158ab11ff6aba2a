package qualifications

import (
	"github.com/tallyhq/tally/internal/jsonx"
)

// view renders a qualified offer in the reference's shape, with its effect
// on the order alone; withHierarchy (expand redeemable) adds a tier's
// hierarchy, Tally's: the reference's qualification does not show it.
func (c *offer) view(withHierarchy bool) map[string]any {
	v := map[string]any{"id": c.req.ID, "object": c.req.Object, "created_at": jsonx.Time{Time: c.at},
		"result": c.effect.Result, "order": c.effect.Order, "applicable_to": emptyList(), "inapplicable_to": emptyList(),
		"metadata": map[string]any{}, "categories": []any{}}
	if c.campaign != nil {
		v["campaign_id"], v["campaign_name"] = c.campaign.ID, c.campaign.Name
	}
	if c.voucher != nil && c.voucher.Attrs.Metadata != nil {
		v["metadata"] = c.voucher.Attrs.Metadata
	}
	if p := c.card; p != nil {
		// What the card pays the order with, at its reward's ratio.
		if p.Card.Metadata != nil {
			v["metadata"] = p.Card.Metadata
		}
		k := p.Reward.Attrs.Parameters.Coin
		v["result"] = map[string]any{"loyalty_card": map[string]any{"points": c.effect.Points, "balance": p.Card.Balance,
			"exchange_ratio": k.ExchangeRatio, "points_ratio": k.PointsRatio}}
	}
	if c.stack != nil {
		v["name"], v["tiers"] = c.stack.Name, map[string]any{"ids": c.stack.TierIDs, "hierarchy_mode": "MANUAL"}
	}
	if c.tier != nil {
		v["name"] = c.tier.Name
		if c.tier.Banner != nil {
			v["banner"] = *c.tier.Banner
		}
		if c.tier.Metadata != nil {
			v["metadata"] = c.tier.Metadata
		}
		if withHierarchy {
			v["hierarchy"] = c.tier.Hierarchy
		}
	}
	return v
}

func emptyList() map[string]any {
	return map[string]any{"data": []any{}, "total": 0, "data_ref": "data", "object": "list"}
}
