// Package campaigns owns the campaigns table, the one campaign model of
// every type, and campaign_voucher_counts, their vouchers_count as counter
// rows: the rows and the attributes every type shares (model.go), every
// statement on those tables and the fragments other owners join a
// campaign with (store.go), the update rules and writes every type shares
// and their webhook notices (service.go), the checks of a campaign's
// validity windows (validity.go), and /v1/campaigns (http.go), which lists
// campaigns of every type at once and serves the rest through a registry
// of kinds (kinds.go).
//
// A kind is what the package that owns a campaign type adds: its voucher
// template and what hangs off a campaign (creating, reading, updating,
// generating vouchers, dropping them after a deletion, summary figures):
// LOYALTY_PROGRAM's cards (regional/loyalty), DISCOUNT_COUPONS' and
// GIFT_VOUCHERS' vouchers (regional/vouchers), PROMOTION's tiers
// (regional/promotions) and REFERRAL_PROGRAM's conversions
// (regional/referrals). Those packages are built on this one and register
// their kinds in regional/app.go.
package campaigns
