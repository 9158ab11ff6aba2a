package customers

import (
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/exports/source"
)

// ExportSources are the objects of POST /v1/exports read from customers:
// the project's customers.
func ExportSources() []source.Source {
	text, at, str, when := source.Text, source.Time, source.String, source.DateTime
	return []source.Source{{
		Name: "customer",
		From: `FROM customers t WHERE t.project_id = $1`,
		Columns: []source.Column{
			text("name", "t.attrs->>'name'"), text("id", "t.id"), text("description", "t.attrs->>'description'"),
			text("email", "t.attrs->>'email'"), text("source_id", "t.source_id"), at("created_at", "t.created_at"),
			text("address_city", "t.attrs->'address'->>'city'"), text("address_state", "t.attrs->'address'->>'state'"),
			text("address_line_1", "t.attrs->'address'->>'line_1'"), text("address_line_2", "t.attrs->'address'->>'line_2'"),
			text("address_country", "t.attrs->'address'->>'country'"),
			text("address_postal_code", "t.attrs->'address'->>'postal_code'"), at("updated_at", "t.updated_at"),
			text("phone", "t.attrs->>'phone'"), text("birthday", "t.attrs->>'birthday'"), text("birthdate", "t.attrs->>'birthdate'"),
			source.JSON("metadata", "t.attrs->'metadata'")},
		Defaults: []string{"name", "source_id"},
		Filters: map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "source_id": str("t.source_id"),
			"email": str("t.email")},
		Sorts: []source.Sort{source.By("created_at", ""), source.By("name", "COALESCE(t.attrs->>'name', '')"), source.By("id", ""),
			source.By("email", "COALESCE(t.email, '')"), source.By("source_id", "COALESCE(t.source_id, '')"),
			source.By("updated_at", "COALESCE(t.updated_at, t.created_at)")},
		Metadata: "t.attrs->'metadata'",
	}}
}

// JoinForExport is the LEFT JOIN, as alias, of the customer of project $1
// that idSQL names: the customer columns of another object's export (a
// voucher's holder, a redemption's customer). Its columns are source_id
// and name.
func JoinForExport(alias, idSQL string) string {
	return ` LEFT JOIN customers ` + alias + ` ON ` + alias + `.project_id = $1 AND ` + alias + `.id = ` + idSQL
}
