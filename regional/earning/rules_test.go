package earning

import (
	"testing"
	"time"

	"github.com/tallyhq/tally/regional/tiers"
)

// What a rule gives for an order, without a database.
func TestRulePoints(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	fixed := RulePoints{Type: "FIXED", Points: n(10)}
	perEuro := RulePoints{Type: "PROPORTIONAL", CalculationType: "ORDER_AMOUNT", Order: &RuleAmount{Amount: &Every{Every: 100, Points: 1}}}
	perTotal := RulePoints{Type: "PROPORTIONAL", CalculationType: "ORDER_TOTAL_AMOUNT", Order: &RuleAmount{TotalAmount: &Every{Every: 50, Points: 3}}}
	for _, c := range []struct {
		name          string
		r             RulePoints
		amount, total *int64
		want          int64
	}{
		{"fixed, whatever the order", fixed, nil, nil, 10},
		{"per euro of the amount, rounded down", perEuro, n(2599), n(1), 25},
		{"per euro, no amount", perEuro, nil, n(5000), 0},
		{"per 0.50 of the total", perTotal, n(1), n(149), 6},
		{"per total, no total", perTotal, n(5000), nil, 0},
	} {
		if got := c.r.points(c.amount, c.total); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// A rule scoped to a tier earns only for holders in it; __ANY__ and no
// scope earn for all; a rule earns only while active and between its dates.
func TestRuleScope(t *testing.T) {
	gold := &tiers.Tier{ID: "gold"}
	for _, scope := range []struct {
		tier *IDRef
		in   *tiers.Tier
		want bool
	}{{nil, nil, true}, {&IDRef{ID: "__ANY__"}, nil, true}, {&IDRef{ID: "gold"}, gold, true}, {&IDRef{ID: "gold"}, nil, false},
		{&IDRef{ID: "silver"}, gold, false}} {
		r := EarningRule{Attrs: RuleAttrs{LoyaltyTier: scope.tier}}
		if got := r.inTier(scope.in); got != scope.want {
			t.Errorf("rule for %v, holder in %v: %v", scope.tier, scope.in, got)
		}
	}
	may, june, july := time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC)
	r := EarningRule{Active: true, Attrs: RuleAttrs{StartDate: &june, ExpirationDate: &july}}
	for at, want := range map[time.Time]bool{may: false, june: true, june.Add(24 * time.Hour): true, july: false} {
		if got := r.live(at); got != want {
			t.Errorf("live at %s: %v, want %v", at.Format(time.DateOnly), got, want)
		}
	}
	r.Active = false
	if r.live(june) {
		t.Error("an inactive rule earns")
	}
}
