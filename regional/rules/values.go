package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The values a rule's documents give, read when it is compiled: each wrong
// one is a 400 naming its path, so that evaluation never meets one.

// decodeObject reads raw as a JSON object of raw members, numbers kept as
// written. null is an empty object.
func decodeObject(path string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return map[string]json.RawMessage{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, bad(path, "must be an object")
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// decodeValue reads raw with numbers as json.Number.
func decodeValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// values reads a condition's value: the reference's array, or one value.
func values(path string, raw json.RawMessage) ([]any, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, bad(path, "must be an array of values")
	}
	var vals []any
	switch x := v.(type) {
	case nil:
	case []any:
		vals = x
	default:
		vals = []any{x}
	}
	if len(vals) > maxValues {
		return nil, bad(path, "holds at most %d values", maxValues)
	}
	return vals, nil
}

// countValues keeps a rule's values within maxAllValues.
func (c *compiler) countValues(path string, n int) error {
	c.values += n
	if c.values > maxAllValues {
		return bad(path, "a rule holds at most %d values in all its conditions", maxAllValues)
	}
	return nil
}

// noValue is what $is_unknown and $has_value take: nothing, true or "".
func noValue(vals []any) bool {
	switch len(vals) {
	case 0:
		return true
	case 1:
		return vals[0] == nil || vals[0] == true || vals[0] == ""
	}
	return false
}

// number reads a condition's number; whole asks for a whole number (cents,
// counts) within the range a float64 holds exactly.
func number(path string, v any, whole bool) (float64, error) {
	jn, ok := v.(json.Number)
	if !ok {
		if whole {
			return 0, bad(path, "must be a whole number (amounts in cents: 5000 for 50.00), got %s", show(v))
		}
		return 0, bad(path, "must be a number, got %s", show(v))
	}
	f, err := strconv.ParseFloat(jn.String(), 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > maxSafeInt {
		return 0, bad(path, "must be a number from -%d to %d, got %s", maxSafeInt, maxSafeInt, jn)
	}
	if whole && f != math.Trunc(f) {
		return 0, bad(path, "must be a whole number (amounts in cents: 5000 for 50.00), got %s", jn)
	}
	return f, nil
}

func stringsOf(path string, vals []any) ([]string, error) {
	if len(vals) == 0 {
		return nil, bad(path, "needs at least one string, as [\"x\"]")
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		s, ok := v.(string)
		p := fmt.Sprintf("%s[%d]", path, i)
		if !ok {
			return nil, bad(p, "must be a string, got %s", show(v))
		}
		if err := checkString(p, s); err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func checkString(path, s string) error {
	if utf8.RuneCountInString(s) > maxText {
		return bad(path, "is longer than %d characters", maxText)
	}
	return nil
}

// show writes a value for a message.
func show(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// refOf reads a product, SKU or collection as conditions and applicable_to
// name them: {"id": …, "source_id": …, "object": "product"|"sku"|"products_collection"}.
func refOf(path string, v any) (ref, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return ref{}, bad(path, "must be an object naming a product, SKU or collection: {\"object\": \"product\", \"id\": \"prod_…\"}, got %s", show(v))
	}
	str := func(k string) (string, error) {
		switch x := m[k].(type) {
		case nil:
			return "", nil
		case string:
			return x, checkString(path+"."+k, x)
		}
		return "", bad(path+"."+k, "must be a string or null")
	}
	var r ref
	var err error
	if r.object, err = str("object"); err != nil {
		return ref{}, err
	}
	if r.id, err = str("id"); err != nil {
		return ref{}, err
	}
	if r.sourceID, err = str("source_id"); err != nil {
		return ref{}, err
	}
	switch r.object {
	case "", "product", "sku", "products_collection":
	default:
		return ref{}, bad(path+".object", "must be product, sku or products_collection, got %q", r.object)
	}
	if r.id == "" && r.sourceID == "" {
		return ref{}, bad(path, "must give an id or a source_id")
	}
	if r.object == "products_collection" && r.id == "" {
		return ref{}, bad(path+".id", "is required for a products_collection")
	}
	return r, nil
}

// ParseTime reads an RFC 3339 date-time or a YYYY-MM-DD date (midnight UTC):
// the dates conditions compare, which the rules' list filters take too.
func ParseTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// timeOf is v as a time: the evaluation time, or a date in a metadata text.
func timeOf(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, true
	case string:
		return ParseTime(x)
	}
	return time.Time{}, false
}
