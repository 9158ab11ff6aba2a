// Package tiers keeps the tiers of loyalty campaigns: ranges of balances
// whose cards' holders share earning and reward terms
// (/v1/loyalties/{campaignId}/tiers, /v1/loyalties/members/{memberId}/tiers).
// It owns the loyalty_tiers table.
//
// The model (tiers.go) is a leaf the others build on: the loyalty program
// reads a campaign's tiers with every locked card in one column (Column,
// Parse) and raises the tier notices when a balance crosses a range (Shift);
// earning maps a rule's points (RuleMapping) and redemptions a reward's
// price (RewardMapping) for the holder's tier. The endpoints (service.go)
// ask the program for campaigns and cards (Program), and earning and
// redemptions for the rules and rewards a tier may map (Terms), which keeps
// this package free of imports of them.
package tiers
