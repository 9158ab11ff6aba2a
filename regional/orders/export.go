package orders

import (
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/exports/source"
)

// ExportSources are the objects of POST /v1/exports read from orders: the
// project's orders.
func ExportSources() []source.Source {
	text, money, at, str, when := source.Text, source.Money, source.Time, source.String, source.DateTime
	return []source.Source{{
		Name: "order",
		From: `FROM orders t WHERE t.project_id = $1`,
		Columns: []source.Column{
			text("id", "t.id"), text("source_id", "t.source_id"), at("created_at", "t.created_at"), at("updated_at", "t.updated_at"),
			text("status", "t.status"), money("amount", "t.amount"), money("discount_amount", "t.discount_amount"),
			money("total_discount_amount", "t.discount_amount"), money("total_amount", "t.amount - COALESCE(t.discount_amount, 0)"),
			text("customer_id", "t.customer_id"), text("referrer_id", "t.referrer_id"), source.JSON("metadata", "t.metadata")},
		Defaults: []string{"id", "source_id", "status"},
		Filters: map[string]filters.Field{"created_at": when("t.created_at"), "status": str("t.status"),
			"customer_id": str("t.customer_id"), "id": str("t.id"), "source_id": str("t.source_id")},
		Sorts: []source.Sort{source.By("created_at", ""), source.By("updated_at", "COALESCE(t.updated_at, t.created_at)"),
			source.By("status", "COALESCE(t.status, '')")},
		Metadata: "t.metadata",
	}}
}

// JoinForExport is the LEFT JOIN, as alias, of the order of project $1
// that idSQL names: the order columns of another object's export (a
// redemption's order_amount).
func JoinForExport(alias, idSQL string) string {
	return ` LEFT JOIN orders ` + alias + ` ON ` + alias + `.project_id = $1 AND ` + alias + `.id = ` + idSQL
}
