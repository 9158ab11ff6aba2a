// Package stacked holds the promotion engine's redemptions once made: the
// rows of stacked_redemptions (a parent and one child per redeemable) and
// stacked_rollbacks, their reads and list (GET /v1/redemptions[/{id}],
// beside the loyalty reward redemptions of regional/redemptions, which it
// hands the rest over to), and their rollback (POST
// /v1/redemptions/{id}/rollback[s]). The engine (regional/engine) judges
// and redeems, and writes what it redeemed here (QueueInsert); what it
// counts for validation rules and summaries is read here too, and the
// redemption export reads the redeemables through ExportRows.
package stacked
