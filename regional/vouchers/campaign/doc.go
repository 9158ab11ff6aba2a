// Package campaign is the voucher campaigns as the API serves them:
// DISCOUNT_COUPONS and GIFT_VOUCHERS (and the codes of REFERRAL_PROGRAM,
// which regional/referrals creates through it). It holds their creation
// request and its checks, the voucher template's updates, the generation
// of their vouchers (CAMPAIGN.VOUCHERS_GENERATE), adding vouchers to a
// campaign (POST /v1/campaigns/{id}/vouchers), a campaign's transactions
// (GET /v1/campaigns/{id}/transactions) and the campaigns.Kind that
// /v1/campaigns serves them through.
//
// It holds no SQL: it is built on regional/vouchers' functions (the
// vouchers' rows, their generation and counts) and regional/campaigns'
// (the campaigns' rows and notices), and nothing below it imports it.
package campaign
