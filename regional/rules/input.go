package rules

import (
	"fmt"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/geo"
)

// Input is what a rule is evaluated against: the order, the customer, the
// redemption counts and the time, as the caller (the validation and
// redemption engine) knows them. A nil Order or Customer makes the names
// that read it unknown.
type Input struct {
	Order    *Order
	Customer *Customer
	// Redemptions are the redemptions made so far; a rule counts the one
	// being validated too, so "redemption.count.per_customer" $less_than_equal
	// [1] lets each customer redeem once.
	Redemptions RedemptionCounts
	// Now is the evaluation time ("date" conditions); zero is the wall clock.
	Now time.Time
	// Event is the custom event being handled (custom_event.metadata), if any.
	Event *Event
	// Metadata is the request's own metadata (redemption.metadata).
	Metadata map[string]any
	// Scope is which conditions are read; the others hold.
	Scope Scope
	// Locations are the shapes of the locations the rules' $in_location
	// conditions name (Program.Locations), by id; one left out holds no
	// point.
	Locations map[string]geo.Shape
}

// Scope is which of a rule's conditions an evaluation reads
// (qualifications' scenarios); a condition not read holds, its nested
// conditions aside.
type Scope int

const (
	// ScopeAll reads every condition.
	ScopeAll Scope = iota
	// ScopeAudience reads only the customer's conditions (customer.*):
	// the order's, the redemption counts, dates and events hold.
	ScopeAudience
	// ScopeWithoutCustomer reads every condition but the customer's.
	ScopeWithoutCustomer
)

// Order is the order under validation. Amounts are in cents.
type Order struct {
	ID       string
	SourceID string
	// Amount is the order's amount (0 is an amount); nil is the sum of its
	// items' amounts.
	Amount *int64
	// InitialAmount is the amount before discounts; nil is Amount.
	InitialAmount *int64
	Items         []Item
	Metadata      map[string]any
}

// Item is an order line.
type Item struct {
	ProductID       string
	ProductSourceID string
	SKUID           string
	SKUSourceID     string
	// CollectionIDs are the product collections the line's product is in.
	CollectionIDs []string
	Quantity      int64
	// Price is the unit price; Amount the line's amount (nil is Price ×
	// Quantity).
	Price    int64
	Amount   *int64
	Metadata map[string]any // the line's product (or SKU) metadata
}

// Customer is the customer validating or redeeming.
type Customer struct {
	ID       string
	SourceID string
	Metadata map[string]any
	// Segments are the ids of the segments the customer is in.
	Segments []string
}

// RedemptionCounts are counts of redemptions made so far.
type RedemptionCounts struct {
	PerCustomer int64 // by this customer, in the campaign (or of the object) the rule guards
	PerCampaign int64 // in the campaign, by anyone
	PerDay      int64 // today, in the campaign
}

// Event is a custom event.
type Event struct {
	Type     string
	Metadata map[string]any
}

// Verdict is a rule's answer for an input.
type Verdict struct {
	Valid bool
	// Error says why not, when not valid.
	Error *RuleError
	// Applicable are the indexes in Order.Items of the lines the rule's
	// applicable_to admits (included or included_all, less excluded); nil
	// when applicable_to names nothing, that is every line.
	Applicable []int
}

// RuleError is why a rule failed.
type RuleError struct {
	RuleID string
	// Condition is the key path of the condition that failed the rule ("2",
	// "3.1" for a nested one): the condition whose message is given, or the
	// failing top-level condition when none has a message.
	Condition string
	// Message is the most specific error.message on the failure's path:
	// the failing condition's, a nested condition's, else the rule's; ""
	// when none was given (the caller's default applies).
	Message string
}

func (o *Order) amount() int64 {
	if o.Amount != nil {
		return *o.Amount
	}
	var sum int64
	for i := range o.Items {
		sum += o.Items[i].amount()
	}
	return sum
}

func (o *Order) initialAmount() int64 {
	if o.InitialAmount != nil {
		return *o.InitialAmount
	}
	return o.amount()
}

func (it *Item) amount() int64 {
	if it.Amount != nil {
		return *it.Amount
	}
	return it.Price * it.Quantity
}

// Check refuses (400, naming the line) an order whose amounts the rules
// could not read exactly: a line's price × quantity, or the lines' sum,
// beyond ±2^53 (the numbers rules compare), which would otherwise wrap.
func (o *Order) Check() error {
	if o == nil {
		return nil
	}
	within := func(n int64) bool { return n >= -maxSafeInt && n <= maxSafeInt }
	var sum int64
	for i := range o.Items {
		it := &o.Items[i]
		if it.Amount == nil && !(within(it.Price) && within(it.Quantity) &&
			(it.Quantity == 0 || abs(it.Price) <= maxSafeInt/abs(it.Quantity))) {
			return apierr.InvalidPayload(fmt.Sprintf("order.items[%d]: price × quantity (%d × %d) is beyond %d",
				i, it.Price, it.Quantity, int64(maxSafeInt)))
		}
		a := it.amount()
		if !within(a) || !within(sum+a) {
			return apierr.InvalidPayload(fmt.Sprintf("order.items[%d]: the items' amounts add up beyond %d", i, int64(maxSafeInt)))
		}
		sum += a
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
