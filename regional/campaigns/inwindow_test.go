package campaigns

import (
	"encoding/json"
	"testing"
	"time"
)

// InWindow is the one reading of validity windows that vouchers, promotion
// tiers and earning rules share: each window bounds, in UTC, and an absent
// one admits any time.
func TestInWindowReadsEachWindowInUTC(t *testing.T) {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) // a Monday
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name         string
		tf, dow, hrs string
		at           time.Time
		want         bool
	}{
		{"nothing", "", "", "", start, true},
		{"timeframe, inside its first hour", `{"interval":"P2D","duration":"PT1H"}`, "", "", start.Add(30 * time.Minute), true},
		{"timeframe, after its hour", `{"interval":"P2D","duration":"PT1H"}`, "", "", start.Add(90 * time.Minute), false},
		{"timeframe, the next interval", `{"interval":"P2D","duration":"PT1H"}`, "", "", start.Add(48*time.Hour + time.Minute), true},
		{"timeframe, before its start", `{"interval":"P2D","duration":"PT1H"}`, "", "", start.Add(-time.Minute), false},
		{"day of week, Monday", "", `[1]`, "", start, true},
		{"day of week, Tuesday only", "", `[2]`, "", start, false},
		{"hours, inside", "", "", `{"daily":[{"start_time":"08:30","expiration_time":"09:30"}]}`, start, true},
		{"hours, the end excluded", "", "", `{"daily":[{"start_time":"08:00","expiration_time":"09:00"}]}`, start, false},
		{"hours, across midnight", "", "", `{"daily":[{"start_time":"22:00","expiration_time":"10:00"}]}`, start, true},
		{"hours, another day", "", "", `{"daily":[{"start_time":"08:00","expiration_time":"10:00","days_of_week":[0]}]}`, start, false},
		{"in another zone, read in UTC", "", `[1]`, "", start.In(time.FixedZone("UTC-10", -10*3600)), true},
	} {
		var tf, dow, hrs json.RawMessage
		if tc.tf != "" {
			tf = raw(tc.tf)
		}
		if tc.dow != "" {
			dow = raw(tc.dow)
		}
		if tc.hrs != "" {
			hrs = raw(tc.hrs)
		}
		if got := InWindow(tf, dow, hrs, &start, tc.at); got != tc.want {
			t.Errorf("%s: InWindow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestISODurationReadsDateAndClockParts(t *testing.T) {
	for in, want := range map[string]time.Duration{"P2D": 48 * time.Hour, "PT1H30M": 90 * time.Minute, "P1W": 7 * 24 * time.Hour,
		"P1DT1S": 24*time.Hour + time.Second, "2D": 0, "": 0} {
		if got := ISODuration(in); got != want {
			t.Errorf("ISODuration(%q) = %v, want %v", in, got, want)
		}
	}
}
