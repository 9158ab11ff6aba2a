package campaigns

import (
	"encoding/json"
	"testing"
	"time"
)

// A validity given as JSON null replaces a campaign's (whose view then shows
// null) and leaves a promotion tier's; an absent one leaves either.
func TestWindowUpdateNullValidityClearsOnlyWhenAsked(t *testing.T) {
	held := json.RawMessage(`{"duration":"PT1H","interval":"P1D"}`)
	for _, tc := range []struct {
		name string
		v    json.RawMessage
		null NullValidity
		want string
	}{
		{"absent, campaign", nil, NullClears, string(held)},
		{"absent, tier", nil, NullIgnored, string(held)},
		{"null, campaign", json.RawMessage("null"), NullClears, "null"},
		{"null, tier", json.RawMessage("null"), NullIgnored, string(held)},
		{"given, tier", json.RawMessage("[1]"), NullIgnored, "[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var start, exp *time.Time
			tf, dow, hours := held, held, held
			u := WindowUpdate{ValidityTimeframe: tc.v, ValidityDayOfWeek: tc.v, ValidityHours: tc.v}
			if err := u.Apply(&start, &exp, &tf, &dow, &hours, tc.null); err != nil {
				t.Fatal(err)
			}
			for _, got := range []json.RawMessage{tf, dow, hours} {
				if string(got) != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			}
		})
	}
}

func TestWindowUpdateRefusesExpirationNotAfterStart(t *testing.T) {
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	held := start.Add(time.Hour)
	exp := &held
	var tf, dow, hours json.RawMessage
	s := (*time.Time)(nil)
	if err := (WindowUpdate{StartDate: &start}).Apply(&s, &exp, &tf, &dow, &hours, NullClears); err != nil {
		t.Fatalf("start before the held expiration: %v", err)
	}
	if err := (WindowUpdate{ExpirationDate: &start}).Apply(&s, &exp, &tf, &dow, &hours, NullClears); err == nil {
		t.Fatal("an expiration_date equal to the start_date was taken")
	}
}
