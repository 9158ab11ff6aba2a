package earning

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/segments"
	"github.com/tallyhq/tally/regional/tiers"
)

// SegmentEntered is the event of the rules that earn when a customer
// enters an auto-update segment.
const SegmentEntered = "customer.segment.entered"

// accrueSegment earns for a customer's entry into an auto-update segment
// (segments.KindEntered), in tx (READ COMMITTED, the cards locked in id
// order): on each of the customer's cards in a campaign with a rule on
// that segment live when they entered, each rule once per (entry, rule,
// card) whatever runs it again.
func (s *Service) accrueSegment(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var e segments.EnteredTask
	if err := json.Unmarshal(t.Payload, &e); err != nil {
		return fmt.Errorf("earning: segment entry %s: %w", t.ID, err)
	}
	rows, err := tx.Query(ctx, `SELECT `+ruleColumns+` FROM earning_rules WHERE project_id = $1 AND event = $2 AND active
		ORDER BY campaign_id, id`, t.ProjectID, SegmentEntered)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EarningRule, error) { return scanRule(r) })
	if err != nil {
		return err
	}
	byCampaign := map[string][]EarningRule{}
	for _, r := range all {
		if r.Attrs.Segment != nil && r.Attrs.Segment.ID == e.SegmentID {
			byCampaign[r.CampaignID] = append(byCampaign[r.CampaignID], r)
		}
	}
	if len(byCampaign) == 0 {
		return nil
	}
	// The customer's metadata as the accrual runs (moments after the
	// entry): what a PROPORTIONAL rule counts. A customer deleted since
	// earns nothing.
	found, err := customerOf(ctx, tx, t.ProjectID, e.CustomerID)
	if err != nil || found == nil {
		return err
	}
	meta := found.Attrs.Metadata
	pass := s.gate(ctx, tx, t.ProjectID, func() (rules.Input, *customers.Customer, error) {
		return rules.Input{Customer: ruleCustomer(found), Now: e.At}, found, nil
	})
	keys, err := s.prog.CardsOf(ctx, tx, t.ProjectID, e.CustomerID)
	if err != nil {
		return err
	}
	now := s.Now()
	segRef := map[string]any{"id": e.SegmentID, "name": e.Segment}
	return s.eachLockedCard(ctx, tx, t.ProjectID, keys, now, nil, func(card *loyalty.LockedCard, w *pgx.Batch, l *loyalty.LedgerWrite) error {
		holder := tiers.Of(card.Campaign.Tiers, card.Balance)
		for _, r := range byCampaign[card.CampaignID] {
			// Only a customer who entered while the rule was live earns.
			pts := r.earns(e.At, holder, func(p RulePoints) int64 { return p.pointsFor(meta) })
			ok, err := accrues(ctx, tx, r, pts, pass, claimEventAccrual, t.ProjectID, e.ID, r.ID, card.ID, now)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if err := s.credit(ctx, w, l, t.ProjectID, card, r, pts, now, nil,
				map[string]any{"segment": segRef, "earning_rule": ruleRef(r)}, holder); err != nil {
				return err
			}
		}
		return nil
	})
}
