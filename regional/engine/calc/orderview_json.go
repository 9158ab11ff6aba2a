package calc

import (
	"strconv"

	"github.com/tallyhq/tally/internal/jsonx"
)

// AppendJSON writes the order as encoding/json does (jsonx.Appender):
// every answer of the engine holds one, a qualification's page one per
// redeemable, and encoding/json's reflection was most of their encoding.
// The end-to-end tests compare the two on every answer.
func (v *OrderView) AppendJSON(b []byte) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	var err error
	sep := false
	str := func(key string, s *string) {
		if s != nil && err == nil {
			b, err = field(b, &sep, key)
			if err == nil {
				b, err = jsonx.Append(b, *s)
			}
		}
	}
	num := func(key string, n int64) {
		if err == nil {
			b, err = field(b, &sep, key)
			b = strconv.AppendInt(b, n, 10)
		}
	}
	str("id", v.ID)
	str("source_id", v.SourceID)
	str("status", v.Status)
	num("amount", v.Amount)
	num("initial_amount", v.InitialAmount)
	num("discount_amount", v.DiscountAmount)
	num("items_discount_amount", v.ItemsDiscountAmount)
	num("total_discount_amount", v.TotalDiscountAmount)
	num("total_amount", v.TotalAmount)
	num("applied_discount_amount", v.AppliedDiscountAmount)
	num("items_applied_discount_amount", v.ItemsAppliedDiscountAmount)
	num("total_applied_discount_amount", v.TotalAppliedDiscountAmount)
	if err == nil {
		b, err = field(b, &sep, "items")
	}
	if err == nil && v.Items == nil {
		b = append(b, "null"...)
	} else if err == nil {
		b = append(b, '[')
		for i := range v.Items {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = v.Items[i].appendJSON(b); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	if err == nil {
		if b, err = field(b, &sep, "metadata"); err == nil {
			b, err = jsonx.Append(b, v.Metadata)
		}
	}
	str("customer_id", v.CustomerID)
	if v.CreatedAt != nil && err == nil {
		if b, err = field(b, &sep, "created_at"); err == nil {
			b, err = jsonx.Append(b, *v.CreatedAt)
		}
	}
	if err == nil {
		b, err = field(b, &sep, "object")
	}
	if err == nil {
		b, err = jsonx.Append(b, v.Object)
	}
	return append(b, '}'), err
}

// appendJSON writes the item as encoding/json does.
func (it *ItemView) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	var err error
	sep := false
	str := func(key, s string) {
		if s != "" && err == nil {
			if b, err = field(b, &sep, key); err == nil {
				b, err = jsonx.Append(b, s)
			}
		}
	}
	num := func(key string, n *int64) {
		if n != nil && err == nil {
			b, err = field(b, &sep, key)
			b = strconv.AppendInt(b, *n, 10)
		}
	}
	val := func(key string, x any) {
		if x != nil && err == nil {
			if b, err = field(b, &sep, key); err == nil {
				b, err = jsonx.Append(b, x)
			}
		}
	}
	str("product_id", it.ProductID)
	str("sku_id", it.SKUID)
	str("source_id", it.SourceID)
	str("related_object", it.RelatedObject)
	for _, f := range []struct {
		key string
		n   int64
	}{{"quantity", it.Quantity}, {"initial_quantity", it.InitialQuantity}, {"amount", it.Amount}, {"initial_amount", it.InitialAmount},
		{"price", it.Price}, {"discount_amount", it.DiscountAmount}, {"applied_discount_amount", it.AppliedDiscountAmount},
		{"subtotal_amount", it.SubtotalAmount}} {
		num(f.key, &f.n)
	}
	num("applied_quantity", it.AppliedQuantity)
	num("applied_quantity_amount", it.AppliedQuantityAmount)
	val("product", it.Product)
	val("sku", it.SKU)
	if len(it.Metadata) > 0 { // omitempty: an empty map is left out too
		val("metadata", it.Metadata)
	}
	if err == nil {
		if b, err = field(b, &sep, "object"); err == nil {
			b, err = jsonx.Append(b, it.Object)
		}
	}
	return append(b, '}'), err
}

// field writes a member's key (and the comma before all but the first).
func field(b []byte, sep *bool, key string) ([]byte, error) {
	if *sep {
		b = append(b, ',')
	}
	*sep = true
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':'), nil
}
