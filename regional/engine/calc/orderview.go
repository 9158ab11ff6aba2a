package calc

import "github.com/tallyhq/tally/internal/jsonx"

// snapshot is what the cart has taken off so far, to tell one
// redeemable's part from the ones before it.
type snapshot struct {
	order int64
	items []int64
}

func (c *cart) snapshot() *snapshot {
	s := &snapshot{order: c.orderDiscount, items: make([]int64, len(c.lines))}
	for i, l := range c.lines {
		s.items[i] = l.discount
	}
	return s
}

// OrderView is the reference's OrderCalculated: an order with the
// discounts of a request (or of one of its redeemables).
type OrderView struct {
	ID                         *string        `json:"id,omitempty"`
	SourceID                   *string        `json:"source_id,omitempty"`
	Status                     *string        `json:"status,omitempty"`
	Amount                     int64          `json:"amount"`
	InitialAmount              int64          `json:"initial_amount"`
	DiscountAmount             int64          `json:"discount_amount"`
	ItemsDiscountAmount        int64          `json:"items_discount_amount"`
	TotalDiscountAmount        int64          `json:"total_discount_amount"`
	TotalAmount                int64          `json:"total_amount"`
	AppliedDiscountAmount      int64          `json:"applied_discount_amount"`
	ItemsAppliedDiscountAmount int64          `json:"items_applied_discount_amount"`
	TotalAppliedDiscountAmount int64          `json:"total_applied_discount_amount"`
	Items                      []ItemView     `json:"items"`
	Metadata                   map[string]any `json:"metadata"`
	CustomerID                 *string        `json:"customer_id,omitempty"`
	CreatedAt                  *jsonx.Time    `json:"created_at,omitempty"`
	Object                     string         `json:"object"`
}

// ItemView is an order item with its discounts (the reference's
// OrderItemCalculated); the request's references to its product or SKU
// are kept.
type ItemView struct {
	ProductID             string         `json:"product_id,omitempty"`
	SKUID                 string         `json:"sku_id,omitempty"`
	SourceID              string         `json:"source_id,omitempty"`
	RelatedObject         string         `json:"related_object,omitempty"`
	Quantity              int64          `json:"quantity"`
	InitialQuantity       int64          `json:"initial_quantity"`
	Amount                int64          `json:"amount"`
	InitialAmount         int64          `json:"initial_amount"`
	Price                 int64          `json:"price"`
	DiscountAmount        int64          `json:"discount_amount"`
	AppliedDiscountAmount int64          `json:"applied_discount_amount"`
	SubtotalAmount        int64          `json:"subtotal_amount"`
	AppliedQuantity       *int64         `json:"applied_quantity,omitempty"`
	AppliedQuantityAmount *int64         `json:"applied_quantity_amount,omitempty"`
	Product               any            `json:"product,omitempty"`
	SKU                   any            `json:"sku,omitempty"`
	Metadata              map[string]any `json:"metadata,omitempty"`
	Object                string         `json:"object"`
}

// Request is the item as an order write takes it back.
func (it ItemView) Request() map[string]any {
	m := map[string]any{"quantity": it.Quantity, "price": it.Price, "amount": it.Amount, "object": "order_item"}
	for k, v := range map[string]string{"product_id": it.ProductID, "sku_id": it.SKUID, "source_id": it.SourceID,
		"related_object": it.RelatedObject} {
		if v != "" {
			m[k] = v
		}
	}
	for k, v := range map[string]any{"product": it.Product, "sku": it.SKU} {
		if v != nil {
			m[k] = v
		}
	}
	if it.Metadata != nil {
		m["metadata"] = it.Metadata
	}
	return m
}

// view renders the order: with the discounts since before (one
// redeemable's part), or all of them.
func (c *cart) view(before *snapshot) *OrderView {
	items := make([]ItemView, len(c.lines))
	var itemsOff int64
	for i, l := range c.lines {
		off := l.discount
		if before != nil && i < len(before.items) {
			off -= before.items[i]
		}
		itemsOff += off
		it := ItemView{ProductID: jsonx.String(l.raw["product_id"]), SKUID: jsonx.String(l.raw["sku_id"]), SourceID: jsonx.String(l.raw["source_id"]),
			RelatedObject: jsonx.String(l.raw["related_object"]), Quantity: l.qty, InitialQuantity: l.initialQty, Amount: l.amount,
			InitialAmount: l.initialAmt, Price: l.price, DiscountAmount: off, AppliedDiscountAmount: off,
			SubtotalAmount: l.amount - l.discount, Product: l.raw["product"], SKU: l.raw["sku"], Object: "order_item"}
		if m, ok := l.raw["metadata"].(map[string]any); ok {
			it.Metadata = m
		}
		if l.qty != l.initialQty {
			q, a := l.qty-l.initialQty, (l.qty-l.initialQty)*l.price
			it.AppliedQuantity, it.AppliedQuantityAmount = &q, &a
		}
		items[i] = it
	}
	orderOff := c.orderDiscount
	if before != nil {
		orderOff -= before.order
	}
	v := &OrderView{Amount: c.amount, InitialAmount: c.amount, DiscountAmount: c.given + orderOff, ItemsDiscountAmount: itemsOff,
		TotalDiscountAmount: c.given + orderOff + itemsOff, TotalAmount: max(0, c.amount-c.given-c.orderDiscount-c.itemsDiscount()),
		AppliedDiscountAmount: orderOff, ItemsAppliedDiscountAmount: itemsOff, TotalAppliedDiscountAmount: orderOff + itemsOff,
		Items: items, Metadata: map[string]any{}, Object: "order"}
	if o := c.o; o != nil {
		v.ID, v.SourceID, v.Status = o.ID, o.SourceID, o.Status
		if o.Metadata != nil {
			v.Metadata = o.Metadata
		}
	}
	return v
}
