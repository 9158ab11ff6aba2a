package validation

import "github.com/tallyhq/tally/regional/rules"

// The rule language's input and verdict under the names the engine knew
// them by while it is being split (issue 36): its callers move to package
// rules with a rename, after which these go.
type (
	Input            = rules.Input
	Order            = rules.Order
	Item             = rules.Item
	Customer         = rules.Customer
	Event            = rules.Event
	RedemptionCounts = rules.RedemptionCounts
	Scope            = rules.Scope
	Verdict          = rules.Verdict
	RuleError        = rules.RuleError
)

// Scopes, as rules names them.
const (
	ScopeAll             = rules.ScopeAll
	ScopeAudience        = rules.ScopeAudience
	ScopeWithoutCustomer = rules.ScopeWithoutCustomer
)
