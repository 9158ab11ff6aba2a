// Package engine is the promotion engine's hot path: stackable validation
// (POST /v1/validations) and redemption (POST /v1/redemptions) of discount
// vouchers, gift cards, loyalty cards paying with a reward and promotion
// tiers against an order and a customer, and the release of LOCK sessions
// (DELETE /v1/vouchers/{code}/sessions/{key}). What it redeemed is stored,
// read, listed and rolled back (POST /v1/redemptions/{id}/rollback[s]) by
// regional/engine/stacked, which it mounts beside its own routes.
//
// A request names up to the stacking rules' limit of redeemables. Each is
// resolved (resolve.go: its voucher or tier read in one batch) and judged
// (judge.go: its campaign, active, dates, validity timeframe, days and
// hours, redemption quantity less what other sessions hold, gift balance,
// and its validation rules, compiled once per version by
// regional/validation); the ones that pass are applied to the order in
// turn by regional/engine/calc, each to what the ones before it left.
// Validation stops there. Redemption does the same under the vouchers' row
// locks in one transaction and writes every effect (redemption counts,
// gift credits through the ledger, the parent redemption and one child per
// redeemable, the webhook notices) or, when one redeemable fails, none: the
// attempt is stored as FAILURE redemptions instead, with the reason.
//
// Qualifications (regional/qualifications) find their own candidates and
// have them judged and applied here (candidates.go: Judge, Effects), so
// that what they offer validates as they say; the engine does not know
// them.
//
// What the engine calls above it is declared here and given to New in
// Deps, never set after: the promotion tiers it validates (Tiers, served
// by regional/promotions) and the conversion of a referral code's
// redeemer (Referrals, by regional/referrals). Both services are built
// before the engine, which their constructors do not need.
package engine
