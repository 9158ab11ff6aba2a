package jsonx

import (
	"encoding/json"
	"testing"
)

func TestValuesReadAsTextAndWholeNumbers(t *testing.T) {
	cases := []struct {
		name string
		v    any
		str  string
		n    int64
	}{
		{"text", "sku_1", "sku_1", 0},
		{"a float64 number", 1250.0, "", 1250},
		{"a fraction, truncated", 12.9, "", 12},
		{"a json.Number", json.Number("4000"), "", 4000},
		{"an int64", int64(7), "", 7},
		{"null or missing", nil, "", 0},
		{"an object", map[string]any{"id": "x"}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.v); got != tc.str {
				t.Fatalf("String(%v) = %q, want %q", tc.v, got, tc.str)
			}
			if got := Int(tc.v); got != tc.n {
				t.Fatalf("Int(%v) = %d, want %d", tc.v, got, tc.n)
			}
		})
	}
}
