package earning

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/tiers"
)

// TierMoves gives the points of the earning rules on tier events
// (customer.loyalty.tier.joined, left, upgraded, downgraded) as the
// program's loyalty.TierEarning: the rules are read with every locked card
// (Column), and a move between tiers (tiers.Shift) earns in the
// transaction that made it, through the ledger write that made it. A
// retried transaction writes the move and its points again or neither;
// there is no notice to replay. It holds nothing, so regional/app.go gives
// it to the program before the earning service is built on the program.
type TierMoves struct{}

// Column reads the campaign k's active tier event rules as one JSON array
// (NULL for none), through its own index (earning_rules_by_campaign).
func (TierMoves) Column() string {
	return `(SELECT jsonb_agg(jsonb_build_object('id', r.id, 'campaign_id', r.campaign_id, 'event', r.event, 'attrs', r.attrs,
		'created_at', r.created_at) ORDER BY r.id)
		FROM earning_rules r WHERE r.project_id = k.project_id AND r.campaign_id = k.id AND r.active
		AND r.event LIKE 'customer.loyalty.tier.%')`
}

// Earn answers what event on tier (from previous, for an upgrade or a
// downgrade) earns at now: each live rule of that event whose loyalty_tier
// is that tier or __ANY__ gives its FIXED points, mapped by the tier the
// holder is in now when it maps the rule, as any rule's points are.
func (TierMoves) Earn(col []byte, event string, tier, previous, holder *tiers.Tier, now time.Time) ([]loyalty.TierAccrual, error) {
	var rows []struct {
		ID         string    `json:"id"`
		CampaignID string    `json:"campaign_id"`
		Event      string    `json:"event"`
		Attrs      RuleAttrs `json:"attrs"`
		CreatedAt  time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(col, &rows); err != nil {
		return nil, fmt.Errorf("earning: tier rules: %w", err)
	}
	var out []loyalty.TierAccrual
	for _, row := range rows {
		r := EarningRule{ID: row.ID, CampaignID: row.CampaignID, Event: row.Event, Active: true, Attrs: row.Attrs, CreatedAt: row.CreatedAt}
		if r.Event != event || !r.live(now) || r.Attrs.LoyaltyTier == nil || !(anyTier(r.Attrs.LoyaltyTier) || r.Attrs.LoyaltyTier.ID == tier.ID) {
			continue
		}
		pts := r.Attrs.Loyalty.pointsFor(nil)
		if m, ok := holder.RuleMapping(r.ID); ok {
			pts = m.Apply(pts)
		}
		if pts <= 0 {
			continue
		}
		a := loyalty.TierAccrual{Points: pts, ByProgram: r.Attrs.ExpirationRules == nil}
		if r.Attrs.ExpirationRules != nil {
			a.Expires = r.Attrs.ExpirationRules.Expiry(now)
		}
		a.Details = map[string]any{"event": map[string]any{"type": event},
			"earning_rule": map[string]any{"id": r.ID, "source": map[string]any{"banner": r.Attrs.Banner}},
			"loyalty_tier": tier.Ref()}
		if holder != nil {
			a.Details["holder_loyalty_tier"] = holder.Ref()
		}
		out = append(out, a)
	}
	return out, nil
}
