// Package loyalty is the loyalty program: its cards (campaigns.go: a
// program's creation and card template; members.go; kind.go, what the
// LOYALTY_PROGRAM campaigns.Kind of regional/loyalty/program asks of the
// cards; the campaign row is regional/campaigns') and the points ledger every balance change goes through (ledger.go:
// balance changes, transfers, the card lock, the one write path LedgerWrite
// and the tier notices it raises; store.go: the card figures, point buckets
// and the transaction record; expiration.go: points expiring, on the dates
// the expiration rules of regional/loyalty/expiry give). It owns the
// loyalty_cards, loyalty_point_buckets and loyalty_transactions tables.
//
// Three packages are built on it, through program.go and the exported
// ledger: earning (rules, accruals, pending points), redemptions (reward
// assignments and paying for them) and tiers (the tier definitions, whose
// ranges the card lock reads with every card).
//
// A card's points change only with the card's row locked (LockCard): the
// figures, the ledger row, the buckets, tier shifts and webhook notices of a
// change are written together in the same transaction, read committed,
// after the lock (see internal/db.InTxReadCommitted).
package loyalty
