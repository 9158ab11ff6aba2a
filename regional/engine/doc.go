// Package engine is the promotion engine's hot path: stackable validation
// (POST /v1/validations) and redemption (POST /v1/redemptions) of discount
// vouchers, gift cards and promotion tiers against an order and a
// customer, their rollback, and the redemptions' list.
//
// A request names up to the stacking rules' limit of redeemables. Each is
// resolved (its voucher or tier and campaign read in one batch), checked
// (active, dates, validity timeframe, days and hours, redemption quantity
// less what other sessions hold, gift balance) and its validation rules
// evaluated (regional/validation: compiled once per version); the ones
// that pass are applied to the order in turn by regional/engine/calc, each
// to what the ones before it left. Validation stops there. Redemption does
// the same under the vouchers' row locks in one transaction and writes
// every effect (redemption counts, gift credits through the ledger, the
// parent redemption and one child per redeemable, the webhook events) or,
// when one redeemable fails, none: the attempt is stored as FAILURE
// redemptions instead, with the reason.
package engine
