// Package earning gives loyalty points for what customers do: earning rules
// (rules.go: /v1/loyalties/{campaignId}/earning-rules), the accrual of a paid
// order's points (pending.go: the order.paid task), pending points and the
// sweep that activates them on their date
// (/v1/loyalties/…/pending-points). It owns the earning_rules,
// loyalty_accruals and loyalty_pending_points tables.
//
// It is built on the loyalty program (regional/loyalty), whose kind takes
// it as its loyalty.Earning (regional/app.go): points reach a card only
// through the program's card lock (LockCard, QueueLockCard) and its ledger
// write (LedgerWrite), so an accrual, an activation and a pending entry
// move the card's figures, buckets, tiers and webhook notices exactly as any
// other change does. The program asks earning for a campaign's rule ids (a
// tier maps only those) and to drop its rows when a campaign and its cards
// are deleted.
//
// An accrual is idempotent: the loyalty_accruals row (order, rule, card) is
// written first, and a second run of the task earns nothing.
//
// A rule earns only inside its validity windows and when the event's
// context meets its validation rule (gate.go). Rules on tier events earn
// inside the program's ledger write, which reads them with the card
// (tiermoves.go: TierMoves, the program's loyalty.TierEarning).
package earning
