package engine

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/tenancy"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/engine")

// Webhook event types of the engine, as the reference names them.
const (
	EventRedemptionSucceeded = "redemption.succeeded"
	EventRedemptionFailed    = "redemption.failed"
	EventValidationSucceeded = "voucher.validation.succeeded"
	EventValidationFailed    = "voucher.validation.failed"
)

// Deps are the services the engine reads and writes through.
type Deps struct {
	Pool        *db.Pool
	Notify      loyalty.Notifier
	Vouchers    *vouchers.Service
	Rules       *validation.Service
	Customers   *customers.Service
	Orders      *orders.Service
	Redemptions *redemptions.Service // loyalty reward redemptions, listed and read beside these
	Clock       *clock.Clock
	// StackingRules are a project's (tenancy's resolver); nil: the defaults.
	StackingRules func(ctx context.Context, projectID string) (tenancy.StackingRules, error)
	// Tiers are the promotion tiers the engine validates (regional/promotions);
	// nil: a promotion_tier redeemable is not found.
	Tiers Tiers
	// Referrals convert the customers of referral codes' redemptions
	// (regional/referrals); nil: they convert no one.
	Referrals Referrals
	// Segments are the segments a customer is in for validation rules'
	// customer.segment (regional/segments); nil: none.
	Segments Segments
}

// Segments says which segments a customer is in: the stored static
// memberships and the filter segments evaluated on the customer as the
// request gives it, in one query.
type Segments interface {
	Of(ctx context.Context, q db.Querier, projectID string, c customers.Customer) ([]string, error)
}

// Engine validates and redeems stacked redeemables.
type Engine struct {
	Deps
	pool      *db.Pool
	rules     *validation.Service
	tiers     Tiers
	referrals Referrals
	stacked   *stacked.Service
}

// Referrals converts customerID, the customer of a redemption, through the
// referral code it redeemed, in the redemption's transaction
// (regional/referrals): redemptionID is the code's redemption, redemption
// its view. It does nothing when the code's program converts on something
// else or the customer was converted in the program before.
type Referrals interface {
	ConvertRedemption(ctx context.Context, tx pgx.Tx, projectID, code, customerID, redemptionID string, redemption any) error
}

// New returns the engine.
func New(d Deps) *Engine {
	return &Engine{Deps: d, pool: d.Pool, rules: d.Rules, tiers: d.Tiers, referrals: d.Referrals,
		stacked: stacked.New(stacked.Deps{Pool: d.Pool, Notify: d.Notify, Vouchers: d.Vouchers, Redemptions: d.Redemptions,
			Clock: d.Clock})}
}

// StackingRulesOf are the project's stacking rules, the defaults when the
// engine was given none.
func (e *Engine) StackingRulesOf(ctx context.Context, projectID string) (tenancy.StackingRules, error) {
	if e.StackingRules == nil {
		return tenancy.DefaultStackingRules(), nil
	}
	return e.StackingRules(ctx, projectID)
}

// Now is the engine's present, to the millisecond that answers show.
func (e *Engine) Now() time.Time { return e.Clock.Now().UTC().Truncate(time.Millisecond) }

// ReadCustomer is the request's customer for a validation: the stored one
// (by id, which must exist, or source_id), else the one described, not
// stored; nil when the request names none.
func (e *Engine) ReadCustomer(ctx context.Context, projectID string, p *customers.Patch) (*customers.Customer, error) {
	if p == nil {
		return nil, nil
	}
	if key := CustomerKey(p); key != "" {
		c, err := e.Customers.Get(ctx, projectID, key)
		var ae *apierr.Error
		if err == nil || !errors.As(err, &ae) || ae.Status != 404 || p.ID != nil {
			return &c, err
		}
	}
	return described(p)
}

// described is the customer the request describes, not stored: what a
// source_id no stored customer has stands for.
func described(p *customers.Patch) (*customers.Customer, error) {
	c := customers.Customer{SourceID: p.SourceID}
	if err := p.Apply(&c.Attrs); err != nil {
		return nil, err
	}
	return &c, nil
}

// CustomerKey is what ReadCustomer looks the request's customer up by
// (customers.QueueGet's idOrSource): its id, else its source_id; "" for
// none.
func CustomerKey(p *customers.Patch) string {
	switch {
	case p == nil:
	case p.ID != nil:
		return *p.ID
	case p.SourceID != nil:
		return *p.SourceID
	}
	return ""
}
