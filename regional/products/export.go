package products

import (
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/exports/source"
)

// ExportSources are the objects of POST /v1/exports read from products:
// live products and SKUs (what is in the bin is not exported).
func ExportSources() []source.Source {
	text, money, at, js, str, when := source.Text, source.Money, source.Time, source.JSON, source.String, source.DateTime
	created := []source.Sort{source.By("created_at", "")}
	return []source.Source{{
		Name: "product",
		From: `FROM products t WHERE t.project_id = $1 AND t.bin_id IS NULL`,
		Columns: []source.Column{
			text("id", "t.id"), text("source_id", "t.source_id"), text("name", "t.name"), money("price", "t.price"),
			js("attributes", "t.attributes"), js("metadata", "t.metadata"), text("image_url", "t.image_url"),
			at("created_at", "t.created_at"), at("updated_at", "t.updated_at")},
		Defaults: []string{"id", "source_id", "name", "price"},
		Filters:  map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "source_id": str("t.source_id")},
		Sorts:    created,
		Metadata: "t.metadata",
	}, {
		Name: "sku",
		From: `FROM skus t WHERE t.project_id = $1`,
		Columns: []source.Column{
			text("id", "t.id"), text("product_id", "t.product_id"), text("source_id", "t.source_id"), text("sku", "t.sku"),
			money("price", "t.price"), text("currency", "t.currency"), js("attributes", "t.attributes"),
			js("metadata", "t.metadata"), text("image_url", "t.image_url"), at("created_at", "t.created_at"),
			at("updated_at", "t.updated_at")},
		Defaults: []string{"id", "product_id", "source_id", "sku", "price"},
		Filters: map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "product_id": str("t.product_id"),
			"source_id": str("t.source_id")},
		Sorts:    created,
		Metadata: "t.metadata",
	}}
}
