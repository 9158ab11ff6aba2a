package campaigns

import (
	"encoding/json"
	"regexp"
	"strconv"
	"time"
)

// InWindow says whether now is inside the validity windows a voucher, a
// promotion tier, a campaign or an earning rule keeps as written (checked
// by CheckValidity): its validity_timeframe counted from start (else the
// epoch), its validity_day_of_week and its validity_hours, all in UTC. An
// absent window admits any time. One reading for everything that has
// windows, so that a voucher and an earning rule of the same windows agree.
func InWindow(tf, dow, hours json.RawMessage, start *time.Time, now time.Time) bool {
	now = now.UTC()
	return inTimeframe(tf, start, now) && onDay(dow, now) && inHours(hours, now)
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
	iv, d := ISODuration(*tf.Interval), ISODuration(*tf.Duration)
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

// ISODuration reads an ISO 8601 duration (P1D, PT2H30M), years as 365
// days and months as 30; 0 when it does not read.
func ISODuration(s string) time.Duration {
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
