package jsonx

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Append appends v's JSON to buf as encoding/json's Encoder writes it
// with SetEscapeHTML(false), byte for byte, without the newline. Answers
// are mostly trees of map[string]any, []any, strings and numbers, which
// encoding/json walks by reflection and whose maps' keys it sorts through
// reflect values: those it writes itself; anything else (structs,
// Marshalers, other maps and slices, strings it would escape, floats in
// exponent form) it hands to encoding/json, so what it writes never
// differs (TestAppendIsEncodingJSON, and the conformance suite's
// comparison of every answer in the end-to-end tests).
func Append(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case Appender:
		return x.AppendJSON(buf)
	case Time:
		return x.appendJSON(buf), nil
	case *Time:
		if x == nil {
			return append(buf, "null"...), nil
		}
		return x.appendJSON(buf), nil
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendString(buf, x)
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case float64:
		if a := math.Abs(x); a == 0 || a >= 1e-6 && a < 1e21 {
			return strconv.AppendFloat(buf, x, 'f', -1, 64), nil
		}
	case map[string]any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		var small [16]string // an answer's maps are small: their keys sort on the stack
		keys := small[:0]
		if len(x) > len(small) {
			keys = make([]string, 0, len(x))
		}
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		var err error
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = appendString(buf, k); err != nil {
				return buf, err
			}
			buf = append(buf, ':')
			if buf, err = Append(buf, x[k]); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	case []any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		buf = append(buf, '[')
		var err error
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = Append(buf, e); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	}
	return appendStd(buf, v)
}

// Appender is a value that writes its own JSON, as encoding/json would
// write it (a type the engine's answers hold many of); a nil pointer
// writes null.
type Appender interface {
	AppendJSON(buf []byte) ([]byte, error)
}

// appendString writes a string that needs no escape as it is, and hands
// the others to encoding/json.
func appendString(buf []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return appendStd(buf, s)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), nil
}

// appendStd is encoding/json's encoding of v, without HTML escaping.
func appendStd(buf []byte, v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return buf, err
	}
	return append(buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), nil
}
