package campaigns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/tallyhq/tally/internal/apierr"
)

// The checks of the JSON documents a campaign keeps as written (its
// validity windows), which vouchers' and tiers' documents share.

// Object reads raw as a JSON object, or answers that path must be one.
func Object(raw json.RawMessage, path string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, apierr.InvalidPayload(path + " must be an object")
	}
	return m, nil
}

// String reads key of m as a string (nil when absent or null), or answers
// that path.key must be one, or is required.
func String(m map[string]json.RawMessage, key, path string, required bool) (*string, error) {
	raw, ok := m[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		if required {
			return nil, apierr.InvalidPayload(path + "." + key + " is required")
		}
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, apierr.InvalidPayload(path + "." + key + " must be a string")
	}
	return &s, nil
}

var clockTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// CheckValidity checks validity_timeframe, validity_day_of_week and
// validity_hours as the specification shapes them.
func CheckValidity(tf, dow, hours json.RawMessage) error {
	if len(tf) > 0 && string(tf) != "null" {
		m, err := Object(tf, "validity_timeframe")
		if err != nil {
			return err
		}
		iv, err := String(m, "interval", "validity_timeframe", false)
		if err != nil {
			return err
		}
		du, err := String(m, "duration", "validity_timeframe", false)
		if err != nil {
			return err
		}
		iso := regexp.MustCompile(`^P(\d+[YMWD])*(T(\d+[HMS])+)?$`)
		for _, s := range []*string{iv, du} {
			if s != nil && (!iso.MatchString(*s) || *s == "P" || *s == "PT") {
				return apierr.InvalidPayload("validity_timeframe.interval and .duration are ISO 8601 durations (P1D, PT1H); got " + *s)
			}
		}
	}
	days := func(raw json.RawMessage, path string) error {
		var ds []int
		if json.Unmarshal(raw, &ds) != nil {
			return apierr.InvalidPayload(path + " must be an array of days of the week, 0 (Sunday) to 6")
		}
		for _, d := range ds {
			if d < 0 || d > 6 {
				return apierr.InvalidPayload(path + " must be an array of days of the week, 0 (Sunday) to 6")
			}
		}
		return nil
	}
	if len(dow) > 0 && string(dow) != "null" {
		if err := days(dow, "validity_day_of_week"); err != nil {
			return err
		}
	}
	if len(hours) > 0 && string(hours) != "null" {
		m, err := Object(hours, "validity_hours")
		if err != nil {
			return err
		}
		var daily []json.RawMessage
		if raw, ok := m["daily"]; ok && json.Unmarshal(raw, &daily) != nil {
			return apierr.InvalidPayload("validity_hours.daily must be an array")
		}
		for i, d := range daily {
			p := fmt.Sprintf("validity_hours.daily[%d]", i)
			dm, err := Object(d, p)
			if err != nil {
				return err
			}
			for _, k := range []string{"start_time", "expiration_time"} {
				s, err := String(dm, k, p, true)
				if err != nil {
					return err
				}
				if !clockTime.MatchString(*s) {
					return apierr.InvalidPayload(p + "." + k + " must be a time of day, HH:MM")
				}
			}
			if raw, ok := dm["days_of_week"]; ok {
				if err := days(raw, p+".days_of_week"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
