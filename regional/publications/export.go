package publications

import (
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/exports/source"
)

// ExportSources are the objects of POST /v1/exports read from
// publications: one row per voucher given (a publication of several
// vouchers is several rows, in its order), failed attempts included.
func ExportSources() []source.Source {
	text, str := source.Text, source.String
	return []source.Source{{
		Name: "publication",
		From: `FROM publications t LEFT JOIN publication_vouchers pv ON pv.project_id = t.project_id AND pv.publication_id = t.id
			WHERE t.project_id = $1`,
		Columns: []source.Column{
			text("id", "t.id"), text("voucher_code", "COALESCE(pv.voucher_code, t.voucher_code)"),
			text("customer_id", "t.customer_id"), text("customer_source_id", "t.tracking_id"), source.Time("date", "t.created_at"),
			text("channel", "t.channel"), text("campaign", "t.campaign_name"), text("campaign_id", "t.campaign_id"),
			text("result", "t.result"), text("failure_code", "t.failure_code"), source.JSON("metadata", "t.metadata")},
		Defaults: []string{"voucher_code", "customer_id", "date", "channel"},
		Filters: map[string]filters.Field{"created_at": source.DateTime("t.created_at"), "id": str("t.id"),
			"voucher_code": str("COALESCE(pv.voucher_code, t.voucher_code)"), "customer_id": str("t.customer_id"),
			"campaign_id": str("t.campaign_id"), "channel": str("t.channel"), "result": str("t.result")},
		Sorts: []source.Sort{source.By("created_at", ""), source.By("id", ""),
			source.By("voucher_code", "COALESCE(pv.voucher_code, t.voucher_code, '')"),
			source.By("tracking_id", "COALESCE(t.tracking_id, '')"), source.By("customer_id", "COALESCE(t.customer_id, '')"),
			source.By("channel", "COALESCE(t.channel, '')")},
		Metadata: "t.metadata",
		Order:    "t.id, pv.position", // a publication's vouchers in its order
	}}
}
