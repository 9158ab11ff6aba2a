// Package expiry is when a loyalty program's added points expire: the
// expiration rules of a program's cards (and of an earning rule that has
// its own), their check, and the date they give points added at a time.
// It is a leaf without SQL that regional/loyalty and regional/earning
// build on.
package expiry

import (
	"time"

	"github.com/tallyhq/tally/internal/apierr"
)

// Rules are a loyalty program's rules for when added points expire (an
// earning rule may have its own).
type Rules struct {
	PeriodType    string `json:"period_type"`              // MONTH or FIXED_DAY_OF_YEAR
	PeriodValue   int    `json:"period_value"`             // months, for MONTH
	RoundingType  string `json:"rounding_type,omitempty"`  // END_OF_MONTH, END_OF_QUARTER, END_OF_HALF_YEAR, END_OF_YEAR, PARTICULAR_MONTH
	RoundingValue int    `json:"rounding_value,omitempty"` // the month, for PARTICULAR_MONTH
	FixedMonth    int    `json:"fixed_month,omitempty"`
	FixedDay      int    `json:"fixed_day,omitempty"`
}

// Check refuses expiration rules the ledger cannot apply.
func Check(r *Rules) error {
	if r == nil {
		return nil
	}
	switch r.PeriodType {
	case "MONTH":
		if r.PeriodValue < 1 || r.PeriodValue > 1200 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.period_value must be from 1 to 1200 months")
		}
	case "FIXED_DAY_OF_YEAR":
		if r.FixedMonth < 1 || r.FixedMonth > 12 || r.FixedDay < 1 || r.FixedDay > 31 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules needs fixed_month 1-12 and fixed_day 1-31")
		}
	default:
		return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.period_type must be MONTH or FIXED_DAY_OF_YEAR")
	}
	switch r.RoundingType {
	case "", "END_OF_MONTH", "END_OF_QUARTER", "END_OF_HALF_YEAR", "END_OF_YEAR":
	case "PARTICULAR_MONTH":
		if r.RoundingValue < 1 || r.RoundingValue > 12 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.rounding_value must be a month, 1-12")
		}
	default:
		return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.rounding_type is not one of END_OF_MONTH, END_OF_QUARTER, END_OF_HALF_YEAR, END_OF_YEAR, PARTICULAR_MONTH")
	}
	return nil
}

// Expiry is when points added now expire under the rules (nil: never).
func (r *Rules) Expiry(now time.Time) *time.Time {
	if r == nil {
		return nil
	}
	d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch r.PeriodType {
	case "MONTH":
		// The same day n months on, or that month's last day when it is
		// shorter (time.AddDate would run on: Jan 31 + 1 month = Mar 3).
		first := time.Date(d.Year(), d.Month()+time.Month(r.PeriodValue), 1, 0, 0, 0, 0, time.UTC)
		last := first.AddDate(0, 1, -1).Day()
		d = time.Date(first.Year(), first.Month(), min(d.Day(), last), 0, 0, 0, 0, time.UTC)
	case "FIXED_DAY_OF_YEAR":
		f := time.Date(d.Year(), time.Month(r.FixedMonth), r.FixedDay, 0, 0, 0, 0, time.UTC)
		if !f.After(d) {
			f = f.AddDate(1, 0, 0)
		}
		d = f
	}
	endOf := func(months int) time.Time { // last day of the period of `months` months holding d
		m := (int(d.Month())-1)/months*months + months
		return time.Date(d.Year(), time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC)
	}
	switch r.RoundingType {
	case "END_OF_MONTH":
		d = endOf(1)
	case "END_OF_QUARTER":
		d = endOf(3)
	case "END_OF_HALF_YEAR":
		d = endOf(6)
	case "END_OF_YEAR":
		d = endOf(12)
	case "PARTICULAR_MONTH":
		e := time.Date(d.Year(), time.Month(r.RoundingValue)+1, 0, 0, 0, 0, 0, time.UTC)
		if e.Before(d) {
			e = time.Date(d.Year()+1, time.Month(r.RoundingValue)+1, 0, 0, 0, 0, 0, time.UTC)
		}
		d = e
	}
	return &d
}
