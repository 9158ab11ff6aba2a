// Package wallet is a customer's wallet, GET /v1/customers/{id}/redeemables:
// what the customer holds. It owns no table: each holding stays with the
// package that owns it (regional/vouchers' discount and gift vouchers,
// regional/loyalty's cards, regional/referrals' holders of referral codes),
// which answers a page of its own holdings as a Source; New takes the
// sources and List merges their pages in id order.
package wallet
