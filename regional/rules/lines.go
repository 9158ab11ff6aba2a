package rules

import (
	"cmp"

	"github.com/tallyhq/tally/internal/jsonx"
)

// LinesOf reads an order's items as the API takes and stores them (the
// reference's order item objects) into the lines a rule reads: a request's
// order in validations and redemptions, a stored order in the earning
// rules of order.paid alike.
func LinesOf(items []map[string]any) []Item {
	var out []Item
	for _, it := range items {
		var li Item
		li.Quantity, li.Price = jsonx.Int(it["quantity"]), jsonx.Int(it["price"])
		if a, ok := it["amount"]; ok && a != nil {
			n := jsonx.Int(a)
			li.Amount = &n
		}
		li.ProductID, li.SKUID = jsonx.String(it["product_id"]), jsonx.String(it["sku_id"])
		if src := jsonx.String(it["source_id"]); src != "" {
			if jsonx.String(it["related_object"]) == "sku" {
				li.SKUSourceID = src
			} else {
				li.ProductSourceID = src
			}
		}
		if p, ok := it["product"].(map[string]any); ok {
			li.ProductID, li.ProductSourceID = cmp.Or(li.ProductID, jsonx.String(p["id"])), cmp.Or(li.ProductSourceID, jsonx.String(p["source_id"]))
			if m, ok := p["metadata"].(map[string]any); ok {
				li.Metadata = m
			}
		}
		if s, ok := it["sku"].(map[string]any); ok {
			li.SKUID, li.SKUSourceID = cmp.Or(li.SKUID, jsonx.String(s["id"])), cmp.Or(li.SKUSourceID, jsonx.String(s["source_id"]))
			if m, ok := s["metadata"].(map[string]any); ok && li.Metadata == nil {
				li.Metadata = m
			}
		}
		out = append(out, li)
	}
	return out
}
