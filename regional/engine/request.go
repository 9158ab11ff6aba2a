package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/tenancy"
)

// Request is the body of POST /v1/validations and POST /v1/redemptions.
type Request struct {
	Redeemables []Redeemable     `json:"redeemables"`
	Order       *orders.Request  `json:"order"`
	Customer    *customers.Patch `json:"customer"`
	Session     *SessionRequest  `json:"session"`
	TrackingID  *string          `json:"tracking_id"`
	Metadata    map[string]any   `json:"metadata"`
	Options     *Options         `json:"options"`
}

// Redeemable is one of a request's redeemables: a voucher (a discount
// voucher, a gift card with the credits to take, a loyalty card with the
// reward it pays for), a promotion tier or a promotion stack.
type Redeemable struct {
	Object string `json:"object"`
	ID     string `json:"id"`
	Gift   *struct {
		Credits *int64 `json:"credits"`
	} `json:"gift"`
	Reward *RewardRequest `json:"reward"`
}

// RewardRequest is the reward a loyalty card pays for, and for a COIN
// reward the points to pay with.
type RewardRequest struct {
	ID     *string `json:"id"`
	Points *int64  `json:"points"`
}

// SessionRequest is a request's session: a LOCK session reserves the
// vouchers validated in it for its key until it expires.
type SessionRequest struct {
	Key     *string  `json:"key"`
	Type    *string  `json:"type"`
	TTL     *float64 `json:"ttl"`
	TTLUnit *string  `json:"ttl_unit"`
}

// Options are a request's options: expand names what the answer adds.
type Options struct {
	Expand []string `json:"expand"`
}

func (o *Options) has(what string) bool {
	if o == nil {
		return false
	}
	for _, e := range o.Expand {
		if e == what {
			return true
		}
	}
	return false
}

// check refuses a request that does not read: no redeemables or too many,
// an unknown object, an empty id, a redeemable named twice, a bad order.
func (r *Request) check(limit int) error {
	if len(r.Redeemables) == 0 {
		return apierr.InvalidPayload(fmt.Sprintf("redeemables is required: from 1 to %d vouchers or promotion tiers", limit))
	}
	if len(r.Redeemables) > limit {
		return apierr.InvalidPayload(fmt.Sprintf("redeemables: at most %d in one request (the project's stacking rules' redeemables_limit)", limit))
	}
	seen := map[string]bool{}
	for i, x := range r.Redeemables {
		p := fmt.Sprintf("redeemables[%d]", i)
		switch x.Object {
		case "voucher", "promotion_tier":
		case "promotion_stack":
			if len(r.Redeemables) > 1 {
				return apierr.InvalidPayload(p + ": a promotion_stack is sent alone, as the only redeemable (its tiers apply in its order)")
			}
		default:
			return apierr.InvalidPayload(p + ".object must be voucher, promotion_tier or promotion_stack")
		}
		if strings.TrimSpace(x.ID) == "" || len(x.ID) > 300 {
			return apierr.InvalidPayload(p + ".id is required: the voucher's code, the promotion tier's or the promotion stack's id")
		}
		if seen[x.Object+"/"+x.ID] {
			return apierr.InvalidPayload(fmt.Sprintf("%s: %s %s is named twice", p, x.Object, x.ID))
		}
		seen[x.Object+"/"+x.ID] = true
		if x.Gift != nil && x.Gift.Credits != nil && *x.Gift.Credits < 0 {
			return apierr.InvalidPayload(p + ".gift.credits must not be negative")
		}
		if w := x.Reward; w != nil {
			switch {
			case x.Object != "voucher":
				return apierr.InvalidPayload(p + ".reward is for a loyalty card: object voucher, id the card's code")
			case x.Gift != nil:
				return apierr.InvalidPayload(p + ": gift is for gift cards and reward for loyalty cards, not both")
			case w.ID == nil || strings.TrimSpace(*w.ID) == "" || len(*w.ID) > 300:
				return apierr.InvalidPayload(p + ".reward.id is required: the reward of the card's campaign to pay with points")
			case w.Points != nil && (*w.Points < 1 || *w.Points > 1e15):
				return apierr.InvalidPayload(p + ".reward.points must be a positive integer: the points to pay with")
			}
		}
	}
	if r.Order != nil {
		items, err := orders.NormalizeItems(r.Order.Items)
		if err != nil {
			return err
		}
		r.Order.Items = items
		for _, a := range []*int64{r.Order.Amount, r.Order.InitialAmount, r.Order.DiscountAmount} {
			if a != nil && (*a < 0 || *a > 1e15) {
				return apierr.InvalidPayload("order amounts are non-negative integers in the smallest currency unit")
			}
		}
	}
	if s := r.Session; s != nil {
		if s.Type != nil && *s.Type != "LOCK" {
			return apierr.InvalidPayload("session.type must be LOCK")
		}
		if s.Key != nil && (strings.TrimSpace(*s.Key) == "" || len(*s.Key) > 200) {
			return apierr.InvalidPayload("session.key must be 1 to 200 characters")
		}
		if s.TTL != nil && (*s.TTL <= 0 || *s.TTL > 1e9) {
			return apierr.InvalidPayload("session.ttl must be positive")
		}
		if s.TTLUnit != nil && ttlUnits[*s.TTLUnit] == 0 {
			return apierr.InvalidPayload("session.ttl_unit must be DAYS, HOURS, MINUTES, SECONDS, MILLISECONDS, MICROSECONDS or NANOSECONDS")
		}
	}
	return nil
}

// ruleOrder is the order as validation rules read it.
func ruleOrder(o *orders.Request) *rules.Order {
	if o == nil {
		return nil
	}
	// An amount given (0 included) is the amount; none, the items' sum.
	out := &rules.Order{Metadata: o.Metadata, Amount: o.Amount, InitialAmount: o.InitialAmount}
	if o.ID != nil {
		out.ID = *o.ID
	}
	if o.SourceID != nil {
		out.SourceID = *o.SourceID
	}
	out.Items = rules.LinesOf(o.Items)
	return out
}

// admit reads the project's stacking rules and holds a validation's or a
// redemption's request to them: its redeemables read and within the
// limit, a promotion stack made its tiers.
func (e *Engine) admit(ctx context.Context, projectID string, r *Request) (tenancy.StackingRules, error) {
	rules, err := e.StackingRulesOf(ctx, projectID)
	if err != nil {
		return rules, err
	}
	if err := r.check(rules.RedeemablesLimit); err != nil {
		return rules, err
	}
	return rules, e.expandStack(ctx, projectID, r, rules.RedeemablesLimit)
}

// expandStack makes a request of one promotion stack a request of its
// tiers, in the stack's order; they count against the redeemables limit.
func (e *Engine) expandStack(ctx context.Context, projectID string, r *Request, limit int) error {
	if len(r.Redeemables) != 1 || r.Redeemables[0].Object != "promotion_stack" {
		return nil
	}
	id := r.Redeemables[0].ID
	if e.tiers == nil {
		return apierr.NotFound("promotion_stack", id)
	}
	tiers, err := e.tiers.StackTiers(ctx, e.pool, projectID, id)
	if err != nil {
		return err
	}
	if len(tiers) == 0 {
		return apierr.InvalidPayload("promotion stack " + id + " has no promotion tiers left")
	}
	if len(tiers) > limit {
		return apierr.InvalidPayload(fmt.Sprintf("promotion stack %s holds %d tiers: at most %d in one request "+
			"(the project's stacking rules' redeemables_limit)", id, len(tiers), limit))
	}
	r.Redeemables = make([]Redeemable, len(tiers))
	for i, t := range tiers {
		r.Redeemables[i] = Redeemable{Object: "promotion_tier", ID: t}
	}
	return nil
}
