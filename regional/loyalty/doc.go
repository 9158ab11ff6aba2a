// Package loyalty serves loyalty programs: campaigns and their cards
// (campaigns.go, members.go), the points ledger every balance change goes
// through (ledger.go: balance changes, transfers, the card lock and the
// transaction record; store.go: the card figures, point buckets and their
// expiry), tiers and reward assignments (tiers.go, assignments.go), earning
// (earning.go: rules; pending.go: accruals from paid orders, pending points
// and their sweep; expiration.go: points expiring). Redemptions are a
// package of their own built on this one (regional/redemptions), through
// program.go: LockCard, LedgerWrite and the pricing rules.
//
// A card's points change only with the card's row locked (lockCard): the
// figures, the ledger row, the buckets, tier shifts and webhook events of a
// change are written together in the same transaction, read committed,
// after the lock (see internal/db.InTxReadCommitted).
package loyalty
