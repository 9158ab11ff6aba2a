// Package redemptions pays for rewards with loyalty points
// (POST /v1/loyalties/{campaignId}/members/{memberId}/redemption and
// /v1/loyalties/members/{memberId}/redemption), serves
// GET /v1/redemptions/{redemptionId} and rolls payments back
// (POST /v1/redemptions/{redemptionId}/rollback).
//
// It is built on the loyalty program (regional/loyalty): a redemption locks
// its card with loyalty's LockCard, reading the reward, its assignment and
// the holder in the same batch, prices the reward (price: an assignment's
// points, mapped by the holder's tier, or for a COIN reward what the order
// still owes), and writes the points through loyalty's LedgerWrite, with the
// redemption row and the reward's counter, in the same two round trips. It
// owns the redemptions and redemption_rollbacks tables.
package redemptions
