// Package referrals runs referral programs: REFERRAL_PROGRAM campaigns
// (rows of regional/campaigns' model created through regional/vouchers,
// whose codes are referral codes published to referrers; kind.go is the
// type's campaigns.Kind), the conversion of a referee through a code (by a
// custom event now, by a redemption through Convert), once per referee and
// program; the referee's reward and the referrer's tiers ("each referee",
// "every N referees") in loyalty points or gift credits, written in the
// conversion's transaction; the customer's referrals summary; and the
// holders of referral codes (/v1/referrals/…/holders).
package referrals
