// Package redemptions is what a loyalty card can buy and the buying:
// reward assignments, which offer a reward in a campaign at a price in
// points (assignments.go: /v1/loyalties/{campaignId}/rewards), and
// redemptions, which pay for them
// (POST /v1/loyalties/{campaignId}/members/{memberId}/redemption and
// /v1/loyalties/members/{memberId}/redemption), read back with
// GET /v1/redemptions/{redemptionId} and rolled back with
// POST /v1/redemptions/{redemptionId}/rollback.
//
// It is built on the loyalty program (regional/loyalty): a redemption locks
// its card with loyalty's LockCard, reading the reward, its assignment and
// the holder in the same batch, prices the reward (price: an assignment's
// points, mapped by the holder's tier, or for a COIN reward what the order
// still owes), and writes the points through loyalty's LedgerWrite, with the
// redemption row and the reward's counter, in the same two round trips. It
// owns the reward_assignments, redemptions and redemption_rollbacks tables,
// and answers the rewards package's questions about assignments
// (rewards.Assignments) and the tiers' about a campaign's rewards.
package redemptions
