package qualifications

import (
	"context"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/engine/calc"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/vouchers"
)

// Tiers reads what qualifications offer without codes (regional/promotions):
// every active tier of live campaigns, and the promotion stacks.
type Tiers interface {
	ActiveTiers(ctx context.Context, q db.Querier, projectID string) ([]engine.Tier, error)
	Stacks(ctx context.Context, q db.Querier, projectID string) ([]Stack, error)
}

// Stack is a promotion stack: its tiers, applied in its order.
type Stack struct {
	ID, Name, CampaignID string
	TierIDs              []string
	CreatedAt            time.Time
}

// offer is a redeemable a qualification may offer: a candidate the engine
// judged, or a promotion stack whose tiers all qualified. Its fields are
// read from the judged candidate once, so that filters, expansions and
// views read one shape for both.
type offer struct {
	judged   *engine.Candidate // nil for a stack
	req      engine.Redeemable
	voucher  *vouchers.Voucher
	tier     *engine.Tier
	card     *redemptions.CardPayment
	stack    *Stack
	parts    []*engine.Candidate // a stack's tiers, in its order
	campaign *campaigns.Window
	// objectID is the voucher's, the tier's or the card's id ("" for a
	// stack); categoryID the category the stacking rules see it in.
	objectID, categoryID string
	at                   time.Time   // its creation time, which pages are cut by
	effect               calc.Effect // on the order alone
}

func offerOf(c *engine.Candidate) *offer {
	return &offer{judged: c, req: c.Redeemable(), voucher: c.Voucher(), tier: c.Tier(), card: c.Card(), campaign: c.Campaign(),
		objectID: c.ObjectID(), categoryID: c.CategoryID()}
}

// stackOffer is a stack of qualified tiers: its campaign and category are
// its first tier's campaign's.
func stackOffer(st *Stack, parts []*engine.Candidate) *offer {
	o := &offer{req: engine.Redeemable{Object: "promotion_stack", ID: st.ID}, stack: st, parts: parts, campaign: parts[0].Campaign()}
	if o.campaign != nil {
		o.categoryID = o.campaign.CategoryID
	}
	return o
}

func (c *offer) campaignID() string {
	if c.campaign != nil {
		return c.campaign.ID
	}
	return ""
}

// applies are what the offer applies to the order: itself, or a stack's
// tiers in turn.
func (c *offer) applies() []*engine.Candidate {
	if c.stack != nil {
		return c.parts
	}
	return []*engine.Candidate{c.judged}
}

// createdAt is what the offer is sorted and paged by: its creation, or now
// for a tier that does not say.
func (c *offer) createdAt(now time.Time) time.Time {
	switch {
	case c.stack != nil:
		return c.stack.CreatedAt
	case c.voucher != nil:
		return c.voucher.CreatedAt
	case c.card != nil:
		return c.card.Card.CreatedAt
	case c.tier.CreatedAt != nil:
		return *c.tier.CreatedAt
	}
	return now
}

// qualifiedStacks are the project's promotion stacks whose every tier is
// among the judged tiers and qualified.
func (s *Service) qualifiedStacks(ctx context.Context, projectID string, tiers []*engine.Candidate) ([]*offer, error) {
	if s.tiers == nil {
		return nil, nil
	}
	stacks, err := s.tiers.Stacks(ctx, s.engine.Pool, projectID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*engine.Candidate, len(tiers))
	for _, c := range tiers {
		if c.Tier() != nil && c.Refusal() == nil {
			byID[c.Tier().ID] = c
		}
	}
	var out []*offer
next:
	for i := range stacks {
		st := &stacks[i]
		parts := make([]*engine.Candidate, 0, len(st.TierIDs))
		for _, id := range st.TierIDs {
			c, ok := byID[id]
			if !ok {
				continue next
			}
			parts = append(parts, c)
		}
		if len(parts) == 0 {
			continue
		}
		out = append(out, stackOffer(st, parts))
	}
	return out, nil
}

// sum is the effects' discounts together.
func sum(effects []calc.Effect) calc.Effect {
	var out calc.Effect
	for _, ef := range effects {
		out.Discount += ef.Discount
	}
	if len(effects) == 1 {
		return effects[0]
	}
	return out
}
