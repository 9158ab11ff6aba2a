// Package jsonx holds the JSON forms the interface uses everywhere:
// timestamps as UTC RFC 3339 with milliseconds, and the reading of values
// decoded into any (metadata, raw order items).
package jsonx

import (
	"time"
)

// TimeLayout is how every timestamp is written.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time marshals as a UTC RFC 3339 timestamp with milliseconds.
type Time struct{ time.Time }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(TimeLayout)+2)), nil
}

// appendJSON appends what MarshalJSON writes (which needs no escape or
// compaction, so encoding/json writes it as it is): Append writes the
// timestamps of a page of answers without encoding/json's Marshaler path.
func (t Time) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

// Ptr returns a *Time for t, or nil when t is nil (marshals as null).
func Ptr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{*t}
}
