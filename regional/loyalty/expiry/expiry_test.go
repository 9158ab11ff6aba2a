package expiry

import (
	"testing"
	"time"
)

// When points added at a time expire under each kind of rules.

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
		rules *Rules
		now   string
		want  string // "" for never
	}{
		{"no rules: never", nil, "2026-03-15", ""},
		{"months", &Rules{PeriodType: "MONTH", PeriodValue: 3}, "2026-03-15", "2026-06-15"},
		{"a year of months", &Rules{PeriodType: "MONTH", PeriodValue: 12}, "2026-03-15", "2027-03-15"},
		{"months from the 31st end on the shorter month's last day", &Rules{PeriodType: "MONTH", PeriodValue: 1}, "2026-01-31", "2026-02-28"},
		{"…in a leap year too", &Rules{PeriodType: "MONTH", PeriodValue: 1}, "2028-01-31", "2028-02-29"},
		{"…and across a year", &Rules{PeriodType: "MONTH", PeriodValue: 13}, "2026-01-31", "2027-02-28"},
		{"end of month", &Rules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_MONTH"}, "2026-03-15", "2026-04-30"},
		{"end of quarter", &Rules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_QUARTER"}, "2026-03-15", "2026-06-30"},
		{"end of half year", &Rules{PeriodType: "MONTH", PeriodValue: 4, RoundingType: "END_OF_HALF_YEAR"}, "2026-03-15", "2026-12-31"},
		{"end of year", &Rules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "END_OF_YEAR"}, "2026-12-15", "2027-12-31"},
		{"a particular month, later this year", &Rules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "PARTICULAR_MONTH", RoundingValue: 9}, "2026-03-15", "2026-09-30"},
		{"a particular month, passed: next year's", &Rules{PeriodType: "MONTH", PeriodValue: 1, RoundingType: "PARTICULAR_MONTH", RoundingValue: 2}, "2026-03-15", "2027-02-28"},
		{"fixed day, still ahead", &Rules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 6, FixedDay: 30}, "2026-03-15", "2026-06-30"},
		{"fixed day, today: next year's", &Rules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 3, FixedDay: 15}, "2026-03-15", "2027-03-15"},
		{"fixed day, passed: next year's", &Rules{PeriodType: "FIXED_DAY_OF_YEAR", FixedMonth: 1, FixedDay: 1}, "2026-03-15", "2027-01-01"},
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
