package engine

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/customers"
)

// requestCustomer is a request's customer as resolve takes it: given (a
// redemption's, upserted in its transaction before), or read in resolve's
// first batch beside the redeemables (a validation's, as ReadCustomer
// reads it), so that it costs no round trip of its own.
type requestCustomer struct {
	given *customers.Customer
	p     *customers.Patch // read when given is nil
	found customers.Found
	asked bool
}

// queue queues the customer's read into b, unless it was given.
func (rc *requestCustomer) queue(b *pgx.Batch, projectID string) {
	if key := CustomerKey(rc.p); rc.given == nil && key != "" {
		customers.QueueGet(b, projectID, key, &rc.found)
		rc.asked = true
	}
}

// get is the customer: given, found by the batch, or else what ReadCustomer
// answers (a customer not stored, described by the request, or the 404 of
// an id no customer has). A source_id the batch found no customer by is
// the described customer at once: ReadCustomer would only read it again
// (by id, by source_id, then the erasures, two round trips that a
// validation for a new customer made every time) to answer the same.
func (rc *requestCustomer) get(ctx context.Context, e *Engine, projectID string) (*customers.Customer, error) {
	if rc.given != nil || rc.p == nil {
		return rc.given, nil
	}
	if c, ok := rc.found.Customer(); ok && rc.asked {
		return &c, nil
	}
	if rc.asked && rc.p.ID == nil {
		return described(rc.p)
	}
	return e.ReadCustomer(ctx, projectID, rc.p)
}
