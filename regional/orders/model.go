// Package orders keeps a project's orders. An order that becomes PAID
// raises customer.order.paid: a webhook notice and, in the same
// transaction, a task for the loyalty programs to earn points on it.
package orders

import (
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Statuses of an order.
var statuses = map[string]bool{"CREATED": true, "PAID": true, "CANCELED": true, "FULFILLED": true}

// Order is an order as stored.
type Order struct {
	ID             string
	SourceID       *string
	Status         string
	Amount         *int64
	InitialAmount  *int64
	DiscountAmount *int64
	Items          []map[string]any
	Metadata       map[string]any
	CustomerID     *string
	ReferrerID     *string
	CreatedAt      time.Time
	UpdatedAt      *time.Time
	PaidAt         *time.Time
}

// TotalAmount is the amount less the discount (nil without an amount).
func (o Order) TotalAmount() *int64 {
	if o.Amount == nil {
		return nil
	}
	t := *o.Amount
	if o.DiscountAmount != nil {
		t -= *o.DiscountAmount
	}
	return &t
}

// View is the reference shape of an order (OrderCalculated).
type View struct {
	ID                         string           `json:"id"`
	SourceID                   *string          `json:"source_id"`
	Status                     string           `json:"status"`
	Amount                     *int64           `json:"amount"`
	InitialAmount              *int64           `json:"initial_amount"`
	DiscountAmount             *int64           `json:"discount_amount"`
	ItemsDiscountAmount        *int64           `json:"items_discount_amount"`
	TotalDiscountAmount        *int64           `json:"total_discount_amount"`
	TotalAmount                *int64           `json:"total_amount"`
	AppliedDiscountAmount      *int64           `json:"applied_discount_amount"`
	ItemsAppliedDiscountAmount *int64           `json:"items_applied_discount_amount"`
	TotalAppliedDiscountAmount *int64           `json:"total_applied_discount_amount"`
	Items                      []map[string]any `json:"items"`
	Metadata                   map[string]any   `json:"metadata"`
	Object                     string           `json:"object"`
	CreatedAt                  jsonx.Time       `json:"created_at"`
	UpdatedAt                  *jsonx.Time      `json:"updated_at"`
	CustomerID                 *string          `json:"customer_id"`
	ReferrerID                 *string          `json:"referrer_id"`
	// Not nullable in the reference: left out when the order has none.
	Customer    *ObjectRef     `json:"customer,omitempty"`
	Referrer    *ObjectRef     `json:"referrer,omitempty"`
	Redemptions map[string]any `json:"redemptions"`
}

// ObjectRef names a related object.
type ObjectRef struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

// View renders the order.
func (o Order) View() View {
	v := View{ID: o.ID, SourceID: o.SourceID, Status: o.Status, Amount: o.Amount, InitialAmount: o.InitialAmount,
		DiscountAmount: o.DiscountAmount, TotalDiscountAmount: o.DiscountAmount, TotalAmount: o.TotalAmount(),
		Items: o.Items, Metadata: o.Metadata, Object: "order", CreatedAt: jsonx.Time{Time: o.CreatedAt},
		UpdatedAt: jsonx.Ptr(o.UpdatedAt), CustomerID: o.CustomerID, ReferrerID: o.ReferrerID, Redemptions: map[string]any{}}
	if v.Items == nil {
		v.Items = []map[string]any{}
	}
	if v.Metadata == nil {
		v.Metadata = map[string]any{}
	}
	if o.CustomerID != nil {
		v.Customer = &ObjectRef{ID: *o.CustomerID, Object: "customer"}
	}
	if o.ReferrerID != nil {
		v.Referrer = &ObjectRef{ID: *o.ReferrerID, Object: "customer"}
	}
	return v
}

// Request is the body of POST /v1/orders and PUT /v1/orders/{orderId}:
// properties it leaves out are kept.
type Request struct {
	ID             *string          `json:"id"`
	SourceID       *string          `json:"source_id"`
	Status         *string          `json:"status"`
	Amount         *int64           `json:"amount"`
	InitialAmount  *int64           `json:"initial_amount"`
	DiscountAmount *int64           `json:"discount_amount"`
	Items          []map[string]any `json:"items"`
	Metadata       map[string]any   `json:"metadata"`
	Customer       json.RawMessage  `json:"customer"`
	CustomerID     *string          `json:"customer_id"`
	ReferrerID     *string          `json:"referrer_id"`
}

// PaidTask is the payload of the task an order that becomes PAID leaves
// for the loyalty programs: the event that the accruals name.
type PaidTask struct {
	OrderID    string          `json:"order_id"`
	CustomerID string          `json:"customer_id"`
	EventID    string          `json:"event_id"`
	GroupID    string          `json:"group_id"`
	CreatedAt  jsonx.Time      `json:"created_at"`
	Source     webhooks.Source `json:"event_source"`
}

// KindPaid is that task's kind.
const KindPaid = "order.paid"

// EventPaid is the webhook event type of an order becoming PAID, and the
// event.type of the accruals and pending points it leads to.
const EventPaid = "customer.order.paid"
