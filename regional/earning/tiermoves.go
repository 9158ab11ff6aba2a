package earning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rules"
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

// KindTierMoved is queued, on the ledger write that moved a card between
// tiers, for each live tier event rule with a validation rule that the
// move meets: that rule earns in the asynchronous phase (accrueTierMove),
// where the customer is read and the validation rule evaluated.
const KindTierMoved = "earning.tier_moved"

// TierMovedTask is a move of a card (ID: what its accrual is made once for,
// per rule and card) that a gated rule may earn by. It holds ids only, no
// personal data.
type TierMovedTask struct {
	ID             string    `json:"id"`
	CardID         string    `json:"card_id"`
	CampaignID     string    `json:"campaign_id"`
	CustomerID     string    `json:"customer_id"`
	RuleID         string    `json:"rule_id"`
	Event          string    `json:"event"`
	TierID         string    `json:"tier_id"`
	PreviousTierID string    `json:"previous_tier_id,omitempty"`
	At             time.Time `json:"at"`
}

// Earn answers what m's event on its tier earns at its instant: each live
// rule of that event whose loyalty_tier is that tier or __ANY__ gives its
// FIXED points, mapped by the tier the holder is in now when it maps the
// rule, as any rule's points are. A rule with a validation rule is queued
// on b instead (KindTierMoved), in the moving transaction, so that a move
// rolled back queues nothing.
func (TierMoves) Earn(ctx context.Context, b *pgx.Batch, m loyalty.TierMove) ([]loyalty.TierAccrual, error) {
	var rows []struct {
		ID         string    `json:"id"`
		CampaignID string    `json:"campaign_id"`
		Event      string    `json:"event"`
		Attrs      RuleAttrs `json:"attrs"`
		CreatedAt  time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(m.Col, &rows); err != nil {
		return nil, fmt.Errorf("earning: tier rules: %w", err)
	}
	var out []loyalty.TierAccrual
	moveID := ""
	for _, row := range rows {
		r := EarningRule{ID: row.ID, CampaignID: row.CampaignID, Event: row.Event, Active: true, Attrs: row.Attrs, CreatedAt: row.CreatedAt}
		if r.Event != m.Event || !r.live(m.At) || r.Attrs.LoyaltyTier == nil || !(anyTier(r.Attrs.LoyaltyTier) || r.Attrs.LoyaltyTier.ID == m.Tier.ID) {
			continue
		}
		if r.Attrs.ValidationRuleID != nil {
			if moveID == "" {
				moveID = ids.New("tmv_")
			}
			task := TierMovedTask{ID: moveID, CardID: m.CardID, CampaignID: m.CampaignID, CustomerID: m.HolderID, RuleID: r.ID,
				Event: m.Event, TierID: m.Tier.ID, At: m.At}
			if m.Previous != nil {
				task.PreviousTierID = m.Previous.ID
			}
			if _, err := async.Queue(ctx, b, m.Project, async.NewTask{Kind: KindTierMoved, Payload: task}); err != nil {
				return nil, err
			}
			continue
		}
		pts := r.tierPoints(m.Holder)
		if pts <= 0 {
			continue
		}
		a := loyalty.TierAccrual{Points: pts, ByProgram: r.Attrs.ExpirationRules == nil}
		if r.Attrs.ExpirationRules != nil {
			a.Expires = r.Attrs.ExpirationRules.Expiry(m.At)
		}
		a.Details = tierDetails(r, m.Event, m.Tier.Ref(), m.Holder)
		out = append(out, a)
	}
	return out, nil
}

// tierPoints is a tier event rule's FIXED points, mapped by the holder's
// tier (nil: none) when it maps the rule.
func (r EarningRule) tierPoints(holder *tiers.Tier) int64 {
	pts := r.Attrs.Loyalty.pointsFor(nil)
	if m, ok := holder.RuleMapping(r.ID); ok {
		pts = m.Apply(pts)
	}
	return pts
}

// tierDetails are the details of a tier event's accrual beside its balance.
func tierDetails(r EarningRule, event string, tier map[string]any, holder *tiers.Tier) map[string]any {
	d := map[string]any{"event": map[string]any{"type": event},
		"earning_rule": map[string]any{"id": r.ID, "source": map[string]any{"banner": r.Attrs.Banner}},
		"loyalty_tier": tier}
	if holder != nil {
		d["holder_loyalty_tier"] = holder.Ref()
	}
	return d
}

// accrueTierMove earns a gated tier event rule's points for a move
// (KindTierMoved), in tx (READ COMMITTED): when the rule is still active
// and was live at the move, and the customer as read now meets its
// validation rule, the card is credited once per (move, rule, card)
// whatever runs the task again. The holder's tier maps the points as the
// card stands now. The moves these points cause earn nothing more
// (LedgerWrite.EarnsForTierEvent).
func (s *Service) accrueTierMove(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var m TierMovedTask
	if err := json.Unmarshal(t.Payload, &m); err != nil {
		return fmt.Errorf("earning: tier move %s: %w", t.ID, err)
	}
	r, err := scanRule(tx.QueryRow(ctx, `SELECT `+ruleColumns+` FROM earning_rules WHERE project_id = $1 AND id = $2 AND active`,
		t.ProjectID, m.RuleID))
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (r.CampaignID != m.CampaignID || !r.live(m.At)) {
		return nil // the rule is gone or disabled since the move
	}
	if err != nil {
		return err
	}
	found, err := customerOf(ctx, tx, t.ProjectID, m.CustomerID)
	if err != nil {
		return err
	}
	ok, err := s.gate(ctx, tx, t.ProjectID, func() (rules.Input, *customers.Customer, error) {
		return rules.Input{Customer: ruleCustomer(found), Now: m.At}, found, nil
	})(r)
	if err != nil || !ok {
		return err // !ok: the customer does not meet the rule's validation rule
	}
	now := s.Now()
	return s.eachLockedCard(ctx, tx, t.ProjectID, []string{m.CardID}, now, nil, func(card *loyalty.LockedCard, w *pgx.Batch, l *loyalty.LedgerWrite) error {
		holder := tiers.Of(card.Campaign.Tiers, card.Balance)
		pts := r.tierPoints(holder)
		if pts <= 0 || card.CampaignID != m.CampaignID {
			return nil
		}
		tag, err := tx.Exec(ctx, claimEventAccrual, t.ProjectID, m.ID, r.ID, card.ID, now)
		if err != nil || tag.RowsAffected() == 0 {
			return err // 0: earned by an earlier run
		}
		tier := map[string]any{"id": m.TierID}
		for i := range card.Campaign.Tiers {
			if card.Campaign.Tiers[i].ID == m.TierID {
				tier = card.Campaign.Tiers[i].Ref()
			}
		}
		exp := card.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
		if r.Attrs.ExpirationRules != nil {
			exp = r.Attrs.ExpirationRules.Expiry(now)
		}
		l.EarnsForTierEvent()
		_, _, err = l.Credit(ctx, card, loyalty.PointsAccrual, pts, exp, nil, tierDetails(r, m.Event, tier, holder))
		return err
	})
}
