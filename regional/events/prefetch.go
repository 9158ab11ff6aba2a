package events

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
)

// prefetch is what an event reads before it writes, sent in one batch
// with the transaction's BEGIN (db.InPipe): its customer, when the
// request names one as it is (by id, else source_id), and the card its
// loyalty.code names, with the card's live campaign.
type prefetch struct {
	customer               customers.Found
	card                   loyalty.LockedCard
	readCustomer, readCard bool
}

// queue is the batch of the reads r needs.
func (pre *prefetch) queue(l *loyalty.Service, projectID string, r Request) *pgx.Batch {
	b := &pgx.Batch{}
	if p := r.Customer; p != nil && !p.Changes() {
		key := ""
		if p.ID != nil {
			key = *p.ID
		} else if p.SourceID != nil {
			key = *p.SourceID
		}
		if key != "" {
			pre.readCustomer = true
			customers.QueueGet(b, projectID, key, &pre.customer)
		}
	}
	if r.Loyalty != nil && r.Loyalty.Code != nil {
		pre.readCard = true
		l.QueueCard(b, projectID, *r.Loyalty.Code, false, &pre.card, nil)
	}
	return b
}

// customerIn is the event's customer: the one prefetched, or else as
// customerOf finds or makes it (a new customer, a changed one, or the
// answer for one not found, which says whether she was deleted).
func (s *Service) customerIn(ctx context.Context, tx pgx.Tx, projectID string, p *customers.Patch, pre *prefetch) (customers.Customer, error) {
	if pre != nil && pre.readCustomer {
		if c, ok := pre.customer.Customer(); ok {
			return c, nil
		}
	}
	return s.customerOf(ctx, tx, projectID, p)
}

// cardIn is the card code names, of a live campaign: the one prefetched,
// or else read in tx. None is 404, as loyalty.Card answers it.
func (s *Service) cardIn(ctx context.Context, tx pgx.Tx, projectID, code string, pre *prefetch) (loyalty.Card, error) {
	if pre == nil || !pre.readCard {
		card, _, err := s.loyalty.Card(ctx, tx, loyalty.CardRef{Project: projectID, Member: code})
		return card, err
	}
	if !pre.card.Found {
		return loyalty.Card{}, apierr.NotFound("voucher", code)
	}
	return pre.card.Card, nil
}
