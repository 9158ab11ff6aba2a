package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/vouchers"
)

// lockKeys are the keys redeemables are locked by: their codes. A request
// names a voucher or card by code or by id (v_…); only when one may be an
// id is its code read first, off the common path.
func (e *Engine) lockKeys(ctx context.Context, q db.Querier, projectID string, r *Request, lock bool) ([]string, error) {
	keys := make([]string, len(r.Redeemables))
	var ids []string
	for i, x := range r.Redeemables {
		keys[i] = x.ID
		if lock && x.Object == "voucher" && strings.HasPrefix(x.ID, "v_") {
			ids = append(ids, x.ID)
		}
	}
	if len(ids) == 0 {
		return keys, nil
	}
	codes, err := vouchers.CodesOfIDs(ctx, q, projectID, ids)
	if err != nil {
		return nil, err
	}
	cards, err := loyalty.CardCodesOfIDs(ctx, q, projectID, ids)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if c, ok := codes[k]; ok {
			keys[i] = c
		} else if c, ok := cards[k]; ok {
			keys[i] = c
		}
	}
	return keys, nil
}

// locking is how resolve reads what a request names.
type locking int

const (
	// readOnly locks nothing: a validation's, a qualification's reads.
	readOnly locking = iota
	// lockHeld is a redemption's: cards, gift cards and what CAMPAIGN
	// rewards give to are locked in code order; discount vouchers are read
	// unlocked and counted last (countVouchers, on counter shards), so that the
	// redeemers of one public code do not take turns on its row for their
	// whole transactions (docs/architecture.md, One hot code).
	lockHeld
	// lockAll locks discount vouchers too, in code order: a redemption whose
	// validation rules count redemptions (per customer, per campaign, per
	// day) must count them under the voucher's lock, or two at once would
	// each see the other's redemption missing.
	lockAll
)

// resolve reads a request's redeemables (locked as lock says), their campaigns,
// the sessions that hold them and their validation rules, and checks each:
// a refused one carries its refusal; it returns them and the request's
// customer (rc's). Reads are batched: one round trip for the vouchers, the
// tiers and the customer, one for campaigns, sessions and rules.
func (e *Engine) resolve(ctx context.Context, q db.Querier, projectID string, r *Request, rc *requestCustomer,
	sessionKey string, mode locking, now time.Time) ([]*Candidate, *customers.Customer, error) {
	lock := mode != readOnly
	cs := make([]*Candidate, len(r.Redeemables))
	found := make([]vouchers.Found, len(r.Redeemables))
	cards := make([]redemptions.CardPayment, len(r.Redeemables))
	b := &pgx.Batch{}
	var tierIDs []string
	// Vouchers and cards are locked in the order of their codes (unique
	// across both in a project), as a rollback locks them
	// (docs/architecture.md, Lock order): two redemptions, or a redemption
	// and a rollback, of the same codes named in other orders queue rather
	// than deadlock.
	order := make([]int, len(r.Redeemables))
	for i, x := range r.Redeemables {
		cs[i], order[i] = &Candidate{req: x}, i
	}
	keys, err := e.lockKeys(ctx, q, projectID, r, lock)
	if err != nil {
		return nil, nil, err
	}
	targets, err := e.heldTargets(ctx, q, projectID, r, keys, lock)
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	for _, i := range order {
		// What CAMPAIGN rewards give to, among them by code.
		for len(targets) > 0 && targets[0].Code < keys[i] {
			e.Redemptions.QueueLockTarget(b, projectID, targets[0])
			targets = targets[1:]
		}
		switch x := r.Redeemables[i]; {
		case x.Object == "voucher" && x.Reward != nil && e.Redemptions != nil:
			e.Redemptions.QueueCardPayment(b, projectID, x.ID, *x.Reward.ID, x.Reward.Points, lock, &cards[i])
		case x.Object == "voucher" && mode == lockHeld:
			vouchers.QueueReadToRedeem(b, projectID, x.ID, &found[i])
		case x.Object == "voucher":
			vouchers.QueueRead(b, projectID, x.ID, lock, &found[i])
		default:
			tierIDs = append(tierIDs, x.ID)
		}
	}
	for _, t := range targets {
		e.Redemptions.QueueLockTarget(b, projectID, t)
	}
	tiers := map[string]Tier{}
	if len(tierIDs) > 0 && e.tiers != nil {
		e.tiers.QueueTiersByID(b, projectID, tierIDs, tiers)
	}
	rc.queue(b, projectID)
	if b.Len() > 0 {
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			return nil, nil, err
		}
	}
	cust, err := rc.get(ctx, e, projectID)
	if err != nil {
		return nil, nil, err
	}
	var missing []string
	for i, c := range cs {
		switch {
		case c.req.Reward != nil && cards[i].Card.Found:
			c.card = &cards[i]
		case c.req.Object == "voucher" && found[i].Found:
			v := found[i].Voucher
			c.voucher = &v
			c.counted = mode != readOnly && vouchers.Counted(&v)
		case c.req.Object == "promotion_tier":
			if t, ok := tiers[c.req.ID]; ok {
				c.tier = &t
			}
		}
		switch {
		case c.voucher != nil || c.tier != nil || c.card != nil:
		case c.req.Reward != nil:
			c.refusal = &Refusal{Code: 404, Key: "not_found", Message: "Resource not found",
				Details: "Cannot find loyalty card with code " + c.req.ID}
		default:
			c.refusal = &Refusal{Code: 404, Key: "not_found", Message: "Resource not found",
				Details: fmt.Sprintf("Cannot find %s with id %s", map[string]string{"voucher": "voucher", "promotion_tier": "promotion tier"}[c.req.Object], c.req.ID)}
			if c.req.Object == "voucher" {
				missing = append(missing, c.req.ID)
			}
		}
	}
	// A voucher not found may be a loyalty card sent without the reward
	// it pays for (read only then: off the hot path).
	if len(missing) > 0 {
		isCard, err := loyalty.CardCodes(ctx, q, projectID, missing)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cs {
			if c.refusal != nil && c.req.Reward == nil && isCard[c.req.ID] {
				c.refusal = refuse("missing_reward", "Missing reward",
					"The loyalty card "+c.req.ID+" pays with points for a reward of its campaign: name it in reward.id.")
			}
		}
	}
	// Two ids of one voucher or card (its code and its v_ id) are one
	// redeemable named twice: each would take its counts, credits or
	// points from its own copy.
	seen := map[string]int{}
	for i, c := range cs {
		if id := c.ObjectID(); id != "" {
			if j, ok := seen[id]; ok {
				return nil, nil, apierr.InvalidPayload(fmt.Sprintf("redeemables[%d] names the same %s as redeemables[%d]", i, c.req.Object, j))
			}
			seen[id] = i
		}
	}
	if err := e.judge(ctx, q, projectID, r.Order, r.Metadata, cust, cs, sessionKey, now); err != nil {
		return nil, nil, err
	}
	cardRules(ctx, cs, cust)
	return cs, cust, nil
}

// cardRules are the checks of loyalty cards across a request: from the
// client side a card pays only for its holder, named by a customer-bound
// token (the router's identity says so); cards paying for one reward take
// no more units than its stock has left, the later ones refused.
func cardRules(ctx context.Context, cs []*Candidate, cust *customers.Customer) {
	who, _ := identity.From(ctx)
	units := map[string]int64{}
	for _, c := range cs {
		p := c.card
		if p == nil || c.refusal != nil {
			continue
		}
		if who.Kind == identity.KindClient {
			if h := p.Card.HolderID; h == nil || cust == nil || cust.ID != *h || who.Customer == "" {
				c.refusal = refuse("customer_not_holder", "Customer is not the card's holder",
					"From the client side a loyalty card pays only for its holder, with a token bound to that customer.")
				continue
			}
		}
		w := p.Reward
		if w.Stock == nil {
			continue
		}
		if units[w.ID]++; w.Redeemed+units[w.ID] > *w.Stock {
			c.refusal = refuse("quantity_exceeded", "Quantity exceeded",
				fmt.Sprintf("Reward %s has %d left in stock: fewer than the cards of the request pay for.", w.ID, max(0, *w.Stock-w.Redeemed)))
		}
	}
}

// heldTargets are what the CAMPAIGN rewards a redemption's cards pay for
// give to and their members hold already (a gift card, another program's
// card), sorted by code, so that resolve locks them by code among the
// redeemables (docs/architecture.md, Lock order). One the request redeems
// itself is refused: the stack would change it twice from two reads.
func (e *Engine) heldTargets(ctx context.Context, q db.Querier, projectID string, r *Request, keys []string, lock bool) ([]redemptions.Target, error) {
	if !lock || e.Redemptions == nil {
		return nil, nil
	}
	var codes, rewardIDs []string
	for i, x := range r.Redeemables {
		if x.Object == "voucher" && x.Reward != nil && x.Reward.ID != nil {
			codes, rewardIDs = append(codes, keys[i]), append(rewardIDs, *x.Reward.ID)
		}
	}
	if len(codes) == 0 {
		return nil, nil
	}
	ts, err := e.Redemptions.HeldTargets(ctx, q, projectID, codes, rewardIDs)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if slices.Contains(keys, t.Code) {
			return nil, apierr.InvalidPayload(fmt.Sprintf("%s is redeemed in this request and a CAMPAIGN reward of it gives to it as well: "+
				"redeem one of them in a request of its own", t.Code))
		}
	}
	sort.Slice(ts, func(a, b int) bool { return ts[a].Code < ts[b].Code })
	return ts, nil
}
