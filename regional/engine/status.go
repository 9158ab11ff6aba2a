package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/tallyhq/tally/regional/campaigns"
)

// Window is when a voucher, a promotion tier or a campaign may be used
// (campaigns.Validity, all in UTC), with its check.
type Window campaigns.Validity

// Refusal is why a redeemable is inapplicable: the reference's error
// object, and the failure_code a FAILURE redemption records.
type Refusal struct {
	Code    int    `json:"code"`
	Key     string `json:"key"`
	Message string `json:"message"`
	Details string `json:"details"`
}

func refuse(key, message, details string) *Refusal {
	return &Refusal{Code: 400, Key: key, Message: message, Details: details}
}

// check says why w does not admit use at now, or nil; what names the
// object ("voucher", "campaign", "promotion tier") in the details.
func (w Window) check(now time.Time, what, id string) *Refusal {
	now = now.UTC()
	switch {
	case !w.Active:
		key := "voucher_disabled"
		if what != "voucher" {
			key = "campaign_disabled"
			if what == "promotion tier" {
				key = "promotion_inactive"
			}
		}
		return refuse(key, capital(what)+" is disabled", fmt.Sprintf("The %s %s is not active.", what, id))
	case w.StartDate != nil && now.Before(*w.StartDate):
		return refuse("voucher_not_active", capital(what)+" not active yet",
			fmt.Sprintf("The %s %s starts at %s.", what, id, w.StartDate.UTC().Format(time.RFC3339)))
	case w.ExpirationDate != nil && !now.Before(*w.ExpirationDate):
		return refuse("voucher_expired", capital(what)+" expired",
			fmt.Sprintf("The %s %s expired at %s.", what, id, w.ExpirationDate.UTC().Format(time.RFC3339)))
	case !inTimeframe(w.ValidityTimeframe, w.StartDate, now) || !onDay(w.ValidityDayOfWeek, now) || !inHours(w.ValidityHours, now):
		return refuse("voucher_not_active", capital(what)+" not active now",
			fmt.Sprintf("The %s %s is outside its validity timeframe, days or hours.", what, id))
	}
	return nil
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// inTimeframe: from the start date (else the epoch), every interval the
// object is valid for duration.
func inTimeframe(raw json.RawMessage, start *time.Time, now time.Time) bool {
	if !present(raw) {
		return true
	}
	var tf struct{ Interval, Duration *string }
	if json.Unmarshal(raw, &tf) != nil || tf.Interval == nil || tf.Duration == nil {
		return true
	}
	iv, d := isoDuration(*tf.Interval), isoDuration(*tf.Duration)
	if iv <= 0 || d <= 0 {
		return true
	}
	from := time.Unix(0, 0).UTC()
	if start != nil {
		from = start.UTC()
	}
	if now.Before(from) {
		return false
	}
	return now.Sub(from)%iv < d
}

var isoPart = regexp.MustCompile(`(\d+)([YMWDHS])`)

// isoDuration reads an ISO 8601 duration (P1D, PT2H30M), years as 365
// days and months as 30; 0 when it does not read.
func isoDuration(s string) time.Duration {
	date, clock, _ := cutT(s)
	var d time.Duration
	for _, p := range []struct {
		part  string
		units map[string]time.Duration
	}{{date, map[string]time.Duration{"Y": 365 * 24 * time.Hour, "M": 30 * 24 * time.Hour, "W": 7 * 24 * time.Hour, "D": 24 * time.Hour}},
		{clock, map[string]time.Duration{"H": time.Hour, "M": time.Minute, "S": time.Second}}} {
		for _, m := range isoPart.FindAllStringSubmatch(p.part, -1) {
			n, _ := strconv.Atoi(m[1])
			d += time.Duration(n) * p.units[m[2]]
		}
	}
	return d
}

func cutT(s string) (date, clock string, ok bool) {
	if len(s) == 0 || s[0] != 'P' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		if s[i] == 'T' {
			return s[1:i], s[i+1:], true
		}
	}
	return s[1:], "", true
}

func onDay(raw json.RawMessage, now time.Time) bool {
	if !present(raw) {
		return true
	}
	var days []int
	if json.Unmarshal(raw, &days) != nil || len(days) == 0 {
		return true
	}
	for _, d := range days {
		if d == int(now.Weekday()) {
			return true
		}
	}
	return false
}

// inHours: within one of the daily periods (HH:MM, start included,
// expiration excluded) whose days of the week (all when none) hold today.
func inHours(raw json.RawMessage, now time.Time) bool {
	if !present(raw) {
		return true
	}
	var h struct {
		Daily []struct {
			StartTime      string `json:"start_time"`
			ExpirationTime string `json:"expiration_time"`
			DaysOfWeek     []int  `json:"days_of_week"`
		} `json:"daily"`
	}
	if json.Unmarshal(raw, &h) != nil || len(h.Daily) == 0 {
		return true
	}
	minute := now.Hour()*60 + now.Minute()
	for _, p := range h.Daily {
		day := len(p.DaysOfWeek) == 0
		for _, d := range p.DaysOfWeek {
			day = day || d == int(now.Weekday())
		}
		from, to := clockMinute(p.StartTime), clockMinute(p.ExpirationTime)
		if day && from >= 0 && to >= 0 && (from <= to && minute >= from && minute < to || from > to && (minute >= from || minute < to)) {
			return true
		}
	}
	return false
}

func clockMinute(s string) int {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return -1
	}
	return t.Hour()*60 + t.Minute()
}
