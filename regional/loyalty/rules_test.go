package loyalty

import (
	"testing"
	"time"
)

// The ledger's pure rules, without a database: when points expire, what a
// reward costs, which tier a balance is in, and how a tier maps points.

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestExpiry(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules *ExpirationRules
		now   string
		want  string // "" for never
	}{
		{"no rules: never", nil, "2026-03-15", ""},
		{"months", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 3}, "2026-03-15", "2026-06-15"},
		{"a year of months", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 12}, "2026-03-15", "2027-03-15"},
		{"months from the 31st end on the shorter month's last day", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1}, "2026-01-31", "2026-02-28"},
		{"…in a leap year too", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1}, "2028-01-31", "2028-02-29"},
		{"…and across a year", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 13}, "2026-01-31", "2027-02-28"},
		{"end of month", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_MONTH"}, "2026-03-15", "2026-04-30"},
		{"end of quarter", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_QUARTER"}, "2026-03-15", "2026-06-30"},
		{"end of half year", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 4, RoundingType: "END_OF_HALF_YEAR"}, "2026-03-15", "2026-12-31"},
		{"end of year", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_YEAR"}, "2026-12-15", "2027-12-31"},
		{"a particular month, later this year", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "PARTICULAR_MONTH", RoundingValue: 9}, "2026-03-15", "2026-09-30"},
		{"a particular month, passed: next year's", &ExpirationRules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "PARTICULAR_MONTH", RoundingValue: 2}, "2026-03-15", "2027-02-28"},
		{"fixed day, still ahead", &ExpirationRules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 6, FixedDay: 30}, "2026-03-15", "2026-06-30"},
		{"fixed day, today: next year's", &ExpirationRules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 3, FixedDay: 15}, "2026-03-15", "2027-03-15"},
		{"fixed day, passed: next year's", &ExpirationRules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 1, FixedDay: 1}, "2026-03-15", "2027-01-01"},
	} {
		got := c.rules.expiry(day(c.now).Add(13 * time.Hour))
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v, want never", c.name, got)
		case c.want != "" && (got == nil || !got.Equal(day(c.want))):
			t.Errorf("%s: %v, want %s", c.name, got, c.want)
		}
	}
}

func TestTierOfABalance(t *testing.T) {
	to := func(n int64) *int64 { return &n }
	tiers := []Tier{{ID: "bronze", From: 100, To: to(299)}, {ID: "silver", From: 300, To: to(999)}, {ID: "gold", From: 1000}}
	for balance, want := range map[int64]string{0: "", 99: "", 100: "bronze", 299: "bronze", 300: "silver", 999: "silver", 1000: "gold", 1 << 40: "gold"} {
		got := ""
		if tr := tierOf(tiers, balance); tr != nil {
			got = tr.ID
		}
		if got != want {
			t.Errorf("balance %d: tier %q, want %q", balance, got, want)
		}
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
		if m, ok := gold.ruleMapping(c.rule); ok {
			got = m.apply(c.points)
		}
		if got != c.want {
			t.Errorf("rule %s on %d: %d, want %d", c.rule, c.points, got, c.want)
		}
	}
	if m, ok := gold.rewardMapping("rew_half"); !ok || m.apply(101) != 50 {
		t.Errorf("half price of 101: %v %v, want 50 (rounded down)", m, ok)
	}
	var none *Tier
	if _, ok := none.ruleMapping("ern_double"); ok {
		t.Error("no tier maps nothing")
	}
	for _, scope := range []struct {
		tier *IDRef
		in   *Tier
		want bool
	}{{nil, nil, true}, {&IDRef{ID: "__ANY__"}, nil, true}, {&IDRef{ID: "gold"}, gold, true}, {&IDRef{ID: "gold"}, nil, false},
		{&IDRef{ID: "silver"}, gold, false}} {
		r := EarningRule{Attrs: RuleAttrs{LoyaltyTier: scope.tier}}
		if got := r.inTier(scope.in); got != scope.want {
			t.Errorf("rule for %v, holder in %v: %v", scope.tier, scope.in, got)
		}
	}
}

// Each kind of change moves the figures it should, and the card's next
// expiration follows its buckets.
func TestLedgerFigures(t *testing.T) {
	may, june := day("2027-05-31"), day("2027-06-30")
	c := Card{}
	c.addPoints(earned, 100, &june)
	c.addPoints(earned, 50, &may)
	c.addPoints(earned, 10, nil)
	if c.Points != 160 || c.Balance != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after earning: %+v", c)
	}
	// Taking 70 empties May's bucket and takes 20 of June's.
	rest := []bucket{{ID: "2027-06-30", Points: 80, ExpiresOn: &june}, {ID: "never", Points: 10}}
	c.takePoints(redeemed, 70, rest)
	if c.RedeemedPoints != 70 || c.Balance != 90 || !c.NextExpirationDate.Equal(june) || *c.NextExpirationPoints != 80 {
		t.Fatalf("after redeeming: %+v", c)
	}
	c.takePoints(subtracted, 5, []bucket{{ID: "2027-06-30", Points: 75, ExpiresOn: &june}, {ID: "never", Points: 10}})
	if c.SubtractedPoints != 5 || c.Balance != 85 || *c.NextExpirationPoints != 75 {
		t.Fatalf("after subtracting: %+v", c)
	}
	// A rollback gives the May part back to May.
	c.addPoints(refunded, 50, &may)
	if c.RedeemedPoints != 20 || c.Balance != 135 || c.Points != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after refunding: %+v", c)
	}
	if b := c.balance(0); b.Total != 155 || b.Balance != 135 {
		t.Fatalf("balance object: %+v", b)
	}
}
