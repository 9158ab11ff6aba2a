package loyalty

import (
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/exports/source"
)

// ExportSources are the objects of POST /v1/exports read from loyalty's
// tables: the ledger (voucher_transactions) and the points that will
// expire (points_expiration).
func ExportSources() []source.Source {
	text, num, at, str, when := source.Text, source.Int, source.Time, source.String, source.DateTime
	return []source.Source{{
		// The ledger, every column as the history endpoint shows it: balance
		// and amount are the transaction's details.balance.balance and .points
		// (a loyalty card's) or .amount (a gift card's credits, which the ledger
		// keeps in the same table).
		Name: "voucher_transactions",
		From: `FROM loyalty_transactions t WHERE t.project_id = $1`,
		Columns: []source.Column{
			text("id", "t.id"), text("campaign_id", "t.campaign_id"), text("voucher_id", "t.card_id"), text("type", "t.type"),
			text("source_id", "t.source_id"), text("reason", "t.reason"), text("source", "t.source"),
			num("balance", "(t.details->'balance'->>'balance')::INT8"), num("amount", "(COALESCE(t.details->'balance'->>'points', t.details->'balance'->>'amount'))::INT8"),
			text("related_transaction_id", "t.related_transaction_id"), at("created_at", "t.created_at"), source.JSON("details", "t.details")},
		// The reference's default list also names `status`, which a
		// transaction does not have and `fields` cannot ask for.
		Defaults: []string{"id", "type", "source_id", "reason", "source", "balance", "amount", "created_at"},
		Filters: map[string]filters.Field{"created_at": when("t.created_at"), "voucher_id": str("t.card_id"),
			"campaign_id": str("t.campaign_id"), "type": str("t.type"), "id": str("t.id")},
		Sorts: []source.Sort{source.By("created_at", "")},
	}, {
		// Points that will expire: the cards' dated buckets (an expired bucket
		// is taken off its card by the expiry sweep, so every row is ACTIVE).
		Name: "points_expiration",
		From: `FROM loyalty_point_buckets b JOIN loyalty_cards c ON c.project_id = b.project_id AND c.id = b.card_id
			WHERE b.project_id = $1 AND b.expires_on IS NOT NULL AND b.points > 0`,
		Columns: []source.Column{
			text("id", "'lopb_' || b.card_id || '_' || b.id"), text("campaign_id", "c.campaign_id"), text("voucher_id", "b.card_id"),
			num("points", "b.points"), text("status", "'ACTIVE'"), source.Date("expires_at", "b.expires_on")},
		Defaults: []string{"id", "campaign_id", "voucher_id", "status", "expires_at", "points"},
		Filters: map[string]filters.Field{"campaign_id": str("c.campaign_id"), "voucher_id": str("b.card_id"),
			"created_at": when("b.created_at")},
		Sorts: []source.Sort{source.By("expires_at", "")},
		Order: "b.expires_on, b.card_id", // by when the points expire
	}}
}

// ExportCardRows is the SELECT of the project $1's loyalty cards as rows
// of the voucher export, in the columns of vouchers.ExportRows, which it
// is UNIONed with (id, code, voucher_type, campaign_id, attrs, metadata,
// category, active, redemption_quantity, redeemed_quantity, holder_id,
// points, created_at, updated_at).
const ExportCardRows = `SELECT c.id, c.code, 'LOYALTY_CARD', c.campaign_id, CAST('{}' AS JSONB), NULLIF(c.metadata, CAST('null' AS JSONB)), NULL, true, NULL,
				NULL, c.holder_id, c.balance, c.created_at, c.updated_at
			FROM loyalty_cards c WHERE c.project_id = $1`
