// Package redemptions is what a loyalty card can buy and the buying:
// reward assignments, which offer a reward in a campaign at a price in
// points, and loyalty reward redemptions, which pay for them with a card's
// points.
//
// Its own routes (Register) are the assignments,
// /v1/loyalties/{campaignId}/rewards[/{assignmentId}] (assignments.go), and
// the redemption of a reward, POST
// /v1/loyalties/{campaignId}/members/{memberId}/redemption and
// /v1/loyalties/members/{memberId}/redemption (redemption.go).
//
// It serves no /v1/redemptions route: POST /v1/redemptions is the
// engine's (regional/engine, http.go), and the stacked redemptions'
// package (regional/engine/stacked, http.go) serves GET
// /v1/redemptions[/{id}] and POST /v1/redemptions/{id}/rollback[s],
// handing an id not its own to GetRedemption here (and a rollback of one
// to Rollback) and merging ListViews into its list. A card paying with a
// reward inside a stacked redemption is this package's too (stacked.go:
// QueueCardPayment, Check, Price, Coin, QueuePay, Refund), called by the
// engine in its own transaction.
//
// It is built on the loyalty program (regional/loyalty): a redemption locks
// its card with loyalty's LockCard, reading the reward, its assignment and
// the holder in the same batch, prices the reward (price: an assignment's
// points, mapped by the holder's tier, or for a COIN reward what the order
// still owes), and writes the points through loyalty's LedgerWrite, with the
// redemption row and the reward's count (rewards.Count, whose
// refusal past the stock rewards.IsOutOfStock tells), in the same two round
// trips. It owns the reward_assignments, redemptions and
// redemption_rollbacks tables,
// and answers the rewards package's questions about assignments
// (rewards.Assignments), the tiers' about a campaign's rewards (RewardIDs)
// and the campaign summaries' about redemption counts (Counts).
package redemptions
