package loyalty

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
)

// The ledger's entries of vouchers that are not loyalty cards. Gift cards'
// credits (regional/vouchers) are kept in loyalty_transactions beside
// points, so a voucher's history, a campaign's and the voucher_transactions
// export read one table; this package stays its one owner, and the voucher
// package writes and reads its entries through these functions. card_id
// holds the voucher's id.

// Gift card transaction types (the reference's GiftVoucherTransactionsType).
const (
	CreditsAddition   = "CREDITS_ADDITION"
	CreditsRemoval    = "CREDITS_REMOVAL"
	CreditsRedemption = "CREDITS_REDEMPTION"
	CreditsRefund     = "CREDITS_REFUND"
)

// QueueEntry queues writing ledger entry t of a voucher the caller owns and
// holds locked in the batch's transaction, with its new figures.
func QueueEntry(b *pgx.Batch, projectID string, t Transaction) {
	queueTransaction(b, projectID, t)
}

// QueueDropEntries queues deleting the entries of vouchers deleted for good.
func QueueDropEntries(b *pgx.Batch, projectID string, voucherIDs []string) {
	b.Queue(`DELETE FROM loyalty_transactions WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, projectID, voucherIDs)
}

// ListEntries returns a page of a voucher's entries (ref.Member, a loyalty
// or gift card's id) or of a campaign's (ref.Campaign, its id), both ids
// the caller has resolved, with tq's cursor, order and filters.
func ListEntries(ctx context.Context, q db.Querier, ref CardRef, tq TxQuery, now time.Time) ([]Transaction, bool, string, error) {
	args := []any{ref.Project}
	where := `project_id = $1`
	if ref.Member != "" {
		args = append(args, ref.Member)
		where += fmt.Sprintf(` AND card_id = $%d`, len(args))
	}
	if ref.Campaign != "" {
		args = append(args, ref.Campaign)
		where += fmt.Sprintf(` AND campaign_id = $%d`, len(args))
	}
	ts, err := pageOfTransactions(ctx, q, tq, where, args, now)
	if err != nil {
		return nil, false, "", err
	}
	ts, more, next := listq.Page(ts, tq.Limit, func(t Transaction) string { return t.ID })
	return ts, more, next, nil
}

// QueueOpeningEntries queues the opening CREDITS_ADDITION entry of each
// of voucherIDs, new gift cards of amount (campaignID "" for standalone
// ones), so that a gift card's balance is the sum of its entries from the
// start. details is the balance object the entries show.
func QueueOpeningEntries(b *pgx.Batch, projectID, campaignID string, voucherIDs []string, amount int64, details []byte, now time.Time) {
	b.Queue(`INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta, source_id, source,
		reason, details, related_transaction_id, created_at)
		SELECT $1, 'vtx_open_' || v, v, $2, $3, $4, NULL, 'API', NULL, $5, NULL, $6 FROM unnest($7::TEXT[]) AS v`,
		projectID, campaignID, CreditsAddition, amount, details, now, voucherIDs)
}
