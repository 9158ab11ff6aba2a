package engine

import (
	"encoding/json"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	start := at("2026-11-02T00:00:00Z") // a Monday
	end := at("2026-12-01T00:00:00Z")
	for _, c := range []struct {
		name string
		w    Window
		now  string
		key  string // "" when usable
	}{
		{"active, no bounds", Window{Active: true}, "2026-11-03T10:00:00Z", ""},
		{"disabled", Window{}, "2026-11-03T10:00:00Z", "voucher_disabled"},
		{"before start", Window{Active: true, StartDate: &start}, "2026-11-01T23:59:59Z", "voucher_not_active"},
		{"at start", Window{Active: true, StartDate: &start}, "2026-11-02T00:00:00Z", ""},
		{"at expiration", Window{Active: true, ExpirationDate: &end}, "2026-12-01T00:00:00Z", "voucher_expired"},
		{"every 2 days for a day, day 1", Window{Active: true, StartDate: &start,
			ValidityTimeframe: json.RawMessage(`{"interval":"P2D","duration":"P1D"}`)}, "2026-11-02T12:00:00Z", ""},
		{"every 2 days for a day, day 2", Window{Active: true, StartDate: &start,
			ValidityTimeframe: json.RawMessage(`{"interval":"P2D","duration":"P1D"}`)}, "2026-11-03T12:00:00Z", "voucher_not_active"},
		{"hourly for 30 minutes", Window{Active: true, StartDate: &start,
			ValidityTimeframe: json.RawMessage(`{"interval":"PT1H","duration":"PT30M"}`)}, "2026-11-05T07:45:00Z", "voucher_not_active"},
		{"weekdays, on Tuesday", Window{Active: true, ValidityDayOfWeek: json.RawMessage(`[1,2,3,4,5]`)}, "2026-11-03T10:00:00Z", ""},
		{"weekdays, on Sunday", Window{Active: true, ValidityDayOfWeek: json.RawMessage(`[1,2,3,4,5]`)}, "2026-11-08T10:00:00Z", "voucher_not_active"},
		{"happy hours, inside", Window{Active: true, ValidityHours: json.RawMessage(
			`{"daily":[{"start_time":"17:00","expiration_time":"19:00","days_of_week":[5]}]}`)}, "2026-11-06T18:59:00Z", ""},
		{"happy hours, at the end", Window{Active: true, ValidityHours: json.RawMessage(
			`{"daily":[{"start_time":"17:00","expiration_time":"19:00","days_of_week":[5]}]}`)}, "2026-11-06T19:00:00Z", "voucher_not_active"},
		{"happy hours, other day", Window{Active: true, ValidityHours: json.RawMessage(
			`{"daily":[{"start_time":"17:00","expiration_time":"19:00","days_of_week":[5]}]}`)}, "2026-11-05T18:00:00Z", "voucher_not_active"},
		{"night hours across midnight", Window{Active: true, ValidityHours: json.RawMessage(
			`{"daily":[{"start_time":"22:00","expiration_time":"02:00"}]}`)}, "2026-11-05T01:00:00Z", ""},
	} {
		r := c.w.check(at(c.now), "voucher", "X")
		got := ""
		if r != nil {
			got = r.Key
		}
		if got != c.key {
			t.Errorf("%s: got %q, want %q (%v)", c.name, got, c.key, r)
		}
	}
	if got := (Window{}).check(start, "promotion tier", "T").Key; got != "promotion_inactive" {
		t.Errorf("disabled tier: %s", got)
	}
}
