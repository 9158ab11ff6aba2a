package engine

import (
	"context"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/engine/calc"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/vouchers"
)

// recalc applies the candidates in turn to the order: the order at the
// end and each one's effect.
func (e *Engine) recalc(ctx context.Context, q db.Querier, projectID string, o *orders.Request, cs []*Candidate) (*calc.OrderView, []calc.Effect, error) {
	return e.recalcViews(ctx, q, projectID, o, cs, true)
}

// recalcViews is recalc that renders the orders only with views: without,
// the effects carry their amounts alone (qualifications' sorting).
func (e *Engine) recalcViews(ctx context.Context, q db.Querier, projectID string, o *orders.Request, cs []*Candidate,
	views bool) (*calc.OrderView, []calc.Effect, error) {
	order, effects, _, err := e.stack(ctx, q, projectID, o, cs, calc.Options{Views: views, Limit: len(cs)})
	return order, effects, err
}

// stack applies cs in turn as opt says (regional/engine/calc); fates say
// which were left out.
func (e *Engine) stack(ctx context.Context, q db.Querier, projectID string, o *orders.Request, cs []*Candidate,
	opt calc.Options) (*calc.OrderView, []calc.Effect, []string, error) {
	rs := make([]calc.Redeemable, len(cs))
	for i, c := range cs {
		rs[i] = c.applies()
	}
	return calc.Apply(ctx, q, projectID, o, rs, opt)
}

// applies is what the candidate applies to the order: a card its reward's
// payment, a gift card its credits, anything else its discount on the
// lines its rules admit.
func (c *Candidate) applies() calc.Redeemable {
	r := calc.Redeemable{ID: c.req.ID}
	switch {
	case c.card != nil:
		r.Card = c.card
	case c.voucher != nil && c.voucher.Type == vouchers.Gift:
		r.Gift = &calc.Gift{Balance: c.voucher.Attrs.Gift.Balance}
		if x := c.req.Gift; x != nil {
			r.Gift.Credits = x.Credits
		}
	default:
		r.Discount, r.Lines = c.discount(), c.lines
	}
	return r
}
