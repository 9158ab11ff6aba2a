package jsonx

import "encoding/json"

// String is a decoded JSON value as text: the string it is, or "" for any
// other value (a number, an object, null, a missing key).
func String(v any) string {
	s, _ := v.(string)
	return s
}

// Int is a decoded JSON value as a whole number: a number decoded as
// float64, json.Number or int64, truncated; 0 for anything else.
func Int(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}
