// Package loyalty is the loyalty program's cards and the points ledger
// every balance change goes through: the cards (cards.go: their making
// with a program's starting points; members.go: joining a program, a card
// read or listed; kind.go, the deletion of a deleted program's cards) and
// the ledger (ledger.go: balance changes, transfers, the card lock, the one
// write path LedgerWrite and the tier notices it raises; store.go: the card
// figures, point buckets and the transaction record; cardevents.go: the
// card's other events and the pages a member's activity merges;
// expiration.go: points expiring, on the dates the expiration rules of
// regional/loyalty/expiry give). It owns the loyalty_cards,
// loyalty_point_buckets, loyalty_transactions and loyalty_card_events
// tables. The program's campaign row is regional/campaigns'; the programs
// as the API serves them (/v1/loyalties, a member's activity, the
// LOYALTY_PROGRAM campaigns.Kind) are regional/loyalty/program, built on
// this package.
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
