package loyalty

import (
	"testing"
	"time"
)

// The ledger's pure rules, without a database: when points expire and how
// each change moves a card's figures.

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
		got := c.rules.Expiry(day(c.now).Add(13 * time.Hour))
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v, want never", c.name, got)
		case c.want != "" && (got == nil || !got.Equal(day(c.want))):
			t.Errorf("%s: %v, want %s", c.name, got, c.want)
		}
	}
}

// Each kind of change moves the figures it should, and the card's next
// expiration follows its buckets.
func TestLedgerFigures(t *testing.T) {
	may, june := day("2027-05-31"), day("2027-06-30")
	c := Card{}
	c.addPoints(Earned, 100, &june)
	c.addPoints(Earned, 50, &may)
	c.addPoints(Earned, 10, nil)
	if c.Points != 160 || c.Balance != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after earning: %+v", c)
	}
	// Taking 70 empties May's bucket and takes 20 of June's.
	rest := []Bucket{{ID: "2027-06-30", Points: 80, ExpiresOn: &june}, {ID: "never", Points: 10}}
	c.takePoints(Redeemed, 70, rest)
	if c.RedeemedPoints != 70 || c.Balance != 90 || !c.NextExpirationDate.Equal(june) || *c.NextExpirationPoints != 80 {
		t.Fatalf("after redeeming: %+v", c)
	}
	c.takePoints(Subtracted, 5, []Bucket{{ID: "2027-06-30", Points: 75, ExpiresOn: &june}, {ID: "never", Points: 10}})
	if c.SubtractedPoints != 5 || c.Balance != 85 || *c.NextExpirationPoints != 75 {
		t.Fatalf("after subtracting: %+v", c)
	}
	// A rollback gives the May part back to May.
	c.addPoints(Refunded, 50, &may)
	if c.RedeemedPoints != 20 || c.Balance != 135 || c.Points != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after refunding: %+v", c)
	}
	if b := c.BalanceAfter(0); b.Total != 155 || b.Balance != 135 {
		t.Fatalf("balance object: %+v", b)
	}
}
