package tiers

import (
	"fmt"
	"testing"
)

// The tiers' pure rules, without a database: which tier a balance is in,
// and how a tier maps an earning rule's points and a reward's price.

func TestTierOfABalance(t *testing.T) {
	to := func(n int64) *int64 { return &n }
	tiers := []Tier{{ID: "bronze", From: 100, To: to(299)}, {ID: "silver", From: 300, To: to(999)}, {ID: "gold", From: 1000}}
	for balance, want := range map[int64]string{0: "", 99: "", 100: "bronze", 299: "bronze", 300: "silver", 999: "silver", 1000: "gold", 1 << 40: "gold"} {
		got := ""
		if tr := Of(tiers, balance); tr != nil {
			got = tr.ID
		}
		if got != want {
			t.Errorf("balance %d: tier %q, want %q", balance, got, want)
		}
	}
}

func TestABalanceCrossingTiersRaisesLeftJoinedAndUpOrDowngrade(t *testing.T) {
	to := func(n int64) *int64 { return &n }
	tiers := []Tier{{ID: "bronze", From: 100, To: to(299)}, {ID: "silver", From: 300, To: to(999)}, {ID: "gold", From: 1000}}
	for _, c := range []struct {
		name          string
		before, after int64
		want          []string // event tier<previous
	}{
		{"within a tier", 120, 250, nil},
		{"within none", 10, 90, nil},
		{"into the first", 50, 150, []string{EventJoined + " bronze"}},
		{"out of the first", 150, 50, []string{EventLeft + " bronze"}},
		{"up two tiers", 150, 1500, []string{EventLeft + " bronze", EventJoined + " gold", EventUpgraded + " gold<bronze"}},
		{"down one", 1500, 500, []string{EventLeft + " gold", EventJoined + " silver", EventDowngraded + " silver<gold"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			err := Shift(tiers, c.before, c.after, func(event string, tr, previous *Tier) error {
				e := event + " " + tr.ID
				if previous != nil {
					e += "<" + previous.ID
				}
				got = append(got, e)
				return nil
			})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%d to %d: %v (%v), want %v", c.before, c.after, got, err, c.want)
			}
		})
	}
}

func TestTierMappings(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	gold := &Tier{ID: "gold", Attrs: TierAttrs{
		EarningRules: map[string]Mapping{"ern_double": {Type: "MULTIPLY", Multiplier: f(2)}, "ern_flat": {Type: "CUSTOM", Points: n(7)}},
		Rewards:      map[string]Mapping{"rew_half": {Type: "MULTIPLY", Multiplier: f(0.5)}},
	}}
	for _, c := range []struct {
		rule   string
		points int64
		want   int64
	}{{"ern_double", 15, 30}, {"ern_flat", 1000, 7}, {"ern_other", 15, 15}} {
		got := c.points
		if m, ok := gold.RuleMapping(c.rule); ok {
			got = m.Apply(c.points)
		}
		if got != c.want {
			t.Errorf("rule %s on %d: %d, want %d", c.rule, c.points, got, c.want)
		}
	}
	if m, ok := gold.RewardMapping("rew_half"); !ok || m.Apply(101) != 50 {
		t.Errorf("half price of 101: %v %v, want 50 (rounded down)", m, ok)
	}
	var none *Tier
	if _, ok := none.RuleMapping("ern_double"); ok {
		t.Error("no tier maps nothing")
	}
}
