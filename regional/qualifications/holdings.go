package qualifications

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/vouchers"
)

// holdings are what a qualification's customer holds that it may offer:
// the wallet's vouchers and the loyalty cards that can pay with points.
type holdings struct {
	wallet []vouchers.Voucher
	cards  []redemptions.CardPayment
}

// customer reads the request's customer as the engine's ReadCustomer does
// and, when the scenario offers the wallet, what they hold, in one round
// trip: each owner of a table queues its read in one batch, the holdings
// naming the customer by a subquery (customers.IDOf) on the id or
// source_id the request gives. A customer not stored is read again by
// ReadCustomer, which describes them, or refuses an id no customer has.
func (s *Service) customer(ctx context.Context, projectID string, sc scenario, p *customers.Patch) (*customers.Customer, *holdings, error) {
	key := engine.CustomerKey(p)
	if key == "" {
		cust, err := s.engine.ReadCustomer(ctx, projectID, p)
		return cust, nil, err
	}
	b := &pgx.Batch{}
	var found customers.Found
	customers.QueueGet(b, projectID, key, &found)
	h := &holdings{}
	if sc.wallet {
		holder := customers.IDOf("$2")
		vouchers.QueueHeldBy(b, projectID, holder, key, WalletLimit, &h.wallet)
		// The customer's loyalty cards that can pay for the order with
		// points (a COIN reward of their campaign).
		// (From the client side, only with a token bound to the customer:
		// a card's code and balance are its holder's to see.)
		if who, _ := identity.From(ctx); s.engine.Redemptions != nil && (who.Kind != identity.KindClient || who.Customer != "") {
			s.engine.Redemptions.QueuePayingCards(b, projectID, holder, key, WalletLimit, &h.cards)
		}
	}
	if err := s.engine.Pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	c, ok := found.Customer()
	if !ok {
		cust, err := s.engine.ReadCustomer(ctx, projectID, p)
		return cust, nil, err
	}
	return &c, h, nil
}
