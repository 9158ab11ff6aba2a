package rules

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ops are the conditions, by the name a rule gives; aliases the reference's
// examples and guides use map to the one they mean.
var ops = map[string]string{
	"$is": "$is", "$is_not": "$is_not", "$in": "$in", "$not_in": "$not_in",
	"$more_than": "$more_than", "$more_than_equal": "$more_than_equal",
	"$more_than_or_equal": "$more_than_equal", "$greater_than_or_equal": "$more_than_equal",
	"$less_than": "$less_than", "$less_than_equal": "$less_than_equal", "$less_than_or_equal": "$less_than_equal",
	"$contains": "$contains", "$not_contain": "$not_contain", "$starts_with": "$starts_with", "$ends_with": "$ends_with",
	"$is_unknown": "$is_unknown", "$has_value": "$has_value", "$after": "$after", "$before": "$before",
	"$in_location": "$in_location",
}

// opsOf are the conditions each kind takes.
var opsOf = map[kind][]string{
	kInt: {"$is", "$is_not", "$in", "$not_in", "$more_than", "$more_than_equal", "$less_than", "$less_than_equal",
		"$is_unknown", "$has_value"},
	kString: {"$is", "$is_not", "$in", "$not_in", "$contains", "$not_contain", "$starts_with", "$ends_with",
		"$is_unknown", "$has_value"},
	kAny: {"$is", "$is_not", "$in", "$not_in", "$more_than", "$more_than_equal", "$less_than", "$less_than_equal",
		"$contains", "$not_contain", "$starts_with", "$ends_with", "$is_unknown", "$has_value", "$after", "$before",
		"$in_location"},
	kSet:   {"$is", "$is_not", "$in", "$not_in", "$is_unknown", "$has_value"},
	kItems: {"$is", "$in"},
	kTime:  {"$after", "$before"},
}

// op compiles condition op of a condition named nm into cd: each family of
// conditions checks its values and returns the test it makes of them.
func (c *compiler) op(cd *cond, path, nm, op string, raw json.RawMessage) error {
	canon, ok := ops[op]
	if !ok {
		return bad(path, "unknown condition %s; %s takes %s", op, nm, strings.Join(opsOf[cd.spec.kind], ", "))
	}
	if !has(opsOf[cd.spec.kind], canon) {
		return bad(path, "%s does not take %s; it takes %s", nm, op, strings.Join(opsOf[cd.spec.kind], ", "))
	}
	vals, err := values(path, raw)
	if err != nil {
		return err
	}
	var t test
	switch canon {
	case "$is_unknown", "$has_value":
		t, err = presence(path, canon, vals)
	case "$more_than", "$more_than_equal", "$less_than", "$less_than_equal":
		t, err = comparison(path, canon, vals, cd.spec.kind == kInt)
	case "$after", "$before":
		t, err = moment(path, canon, vals)
	case "$contains", "$not_contain", "$starts_with", "$ends_with":
		t, err = textMatch(path, canon, vals)
	case "$in_location":
		return c.inLocation(cd, path, vals)
	default:
		t, err = c.equality(cd, path, canon, vals)
	}
	if err != nil || t == nil { // an items condition keeps refs, not a test
		return err
	}
	cd.tests = append(cd.tests, t)
	cd.noteBound(canon, vals)
	return nil
}

// noteBound keeps a comparison's bound for an Index: a number's, or a
// date's (the date name's) in microseconds, which keep the order.
func (cd *cond) noteBound(canon string, vals []any) {
	var f float64
	switch canon {
	case "$more_than", "$more_than_equal", "$less_than", "$less_than_equal":
		n, err := number("", vals[0], cd.spec.kind == kInt)
		if err != nil {
			return
		}
		f = n
	case "$after", "$before":
		s, _ := vals[0].(string)
		t, ok := ParseTime(s)
		if !ok || cd.spec.kind != kTime {
			return
		}
		f = float64(t.UnixMicro())
	default:
		return
	}
	switch canon {
	case "$more_than", "$more_than_equal", "$after":
		cd.lo = append(cd.lo, f)
	default:
		cd.hi = append(cd.hi, f)
	}
}

// presence is $is_unknown and $has_value.
func presence(path, canon string, vals []any) (test, error) {
	if !noValue(vals) {
		return nil, bad(path, "takes no value: pass [] or true")
	}
	if canon == "$is_unknown" {
		return func(v any) bool { return v == nil }, nil
	}
	return func(v any) bool { return v != nil }, nil
}

// comparison is $more_than, $less_than and their _equal; whole asks for a
// whole number (the int names: cents, counts).
func comparison(path, canon string, vals []any, whole bool) (test, error) {
	if len(vals) != 1 {
		return nil, bad(path, "takes one number, as [5000]")
	}
	n, err := number(path+"[0]", vals[0], whole)
	if err != nil {
		return nil, err
	}
	cmp := map[string]func(a float64) bool{
		"$more_than": func(a float64) bool { return a > n }, "$more_than_equal": func(a float64) bool { return a >= n },
		"$less_than": func(a float64) bool { return a < n }, "$less_than_equal": func(a float64) bool { return a <= n },
	}[canon]
	return func(v any) bool { f, ok := v.(float64); return ok && cmp(f) }, nil
}

// moment is $after and $before.
func moment(path, canon string, vals []any) (test, error) {
	if len(vals) != 1 {
		return nil, bad(path, "takes one date-time, as [\"2026-01-31T00:00:00Z\"]")
	}
	s, _ := vals[0].(string)
	t, ok := ParseTime(s)
	if !ok {
		return nil, bad(path+"[0]", "must be an RFC 3339 date-time or a YYYY-MM-DD date, got %s", show(vals[0]))
	}
	after := canon == "$after"
	return func(v any) bool {
		at, ok := timeOf(v)
		return ok && (after && at.After(t) || !after && at.Before(t))
	}, nil
}

// textMatch is $contains, $not_contain, $starts_with and $ends_with.
func textMatch(path, canon string, vals []any) (test, error) {
	ss, err := stringsOf(path, vals)
	if err != nil {
		return nil, err
	}
	match := map[string]func(a, b string) bool{"$contains": strings.Contains, "$not_contain": strings.Contains,
		"$starts_with": strings.HasPrefix, "$ends_with": strings.HasSuffix}[canon]
	t := func(v any) bool {
		switch x := v.(type) {
		case string:
			return anyOf(ss, func(s string) bool { return match(x, s) })
		case []any: // a list contains a value
			return canon != "$starts_with" && canon != "$ends_with" &&
				anyOf(x, func(e any) bool { return anyOf(ss, func(s string) bool { return e == s }) })
		}
		return false
	}
	if canon == "$not_contain" {
		return func(v any) bool { return !t(v) }, nil
	}
	return t, nil
}

// equality is $is, $is_not, $in, $not_in: equal to one of the values, or
// to none. An empty list ($in: [], which the reference's arrays allow) is
// equal to nothing: $in holds for no value, $not_in for every one. An
// items condition keeps the products, SKUs and collections in cd.refs and
// returns no test.
func (c *compiler) equality(cd *cond, path, canon string, vals []any) (test, error) {
	if len(vals) == 0 && (canon == "$is" || canon == "$is_not") {
		return nil, bad(path, "needs at least one value, as [\"x\"]")
	}
	negate := canon == "$is_not" || canon == "$not_in"
	if err := c.countValues(path, len(vals)); err != nil {
		return nil, err
	}
	if cd.spec.kind == kItems {
		return nil, itemRefs(cd, path, vals)
	}
	want, err := wanted(path, cd.spec.kind, vals)
	if err != nil {
		return nil, err
	}
	// The values as a set: a lookup per value compared, whatever their number.
	set := make(map[any]bool, len(want))
	for _, w := range want {
		set[w] = true
	}
	in := func(v any) bool {
		switch v.(type) {
		case float64, string, bool:
			return set[v]
		}
		return false // maps and lists are never equal to a value
	}
	eq := func(v any) bool {
		if l, ok := v.([]any); ok { // a list (segments, a metadata array) equals when one member does
			return anyOf(l, in)
		}
		return in(v)
	}
	if negate {
		return func(v any) bool { return !eq(v) }, nil
	}
	cd.eqs = append(cd.eqs, want)
	return eq, nil
}

// itemRefs reads the products, SKUs and collections an items condition
// names into cd.
func itemRefs(cd *cond, path string, vals []any) error {
	seen := map[ref]bool{}
	for i, v := range vals {
		r, err := refOf(fmt.Sprintf("%s[%d]", path, i), v)
		if err != nil {
			return err
		}
		if !seen[r] { // a product named twice is checked once
			seen[r] = true
			cd.refs = append(cd.refs, r)
		}
	}
	return nil
}

// wanted reads the values an equality compares with, as the readers
// normalise what they compare: numbers as float64.
func wanted(path string, k kind, vals []any) ([]any, error) {
	want := make([]any, len(vals))
	for i, v := range vals {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch k {
		case kInt:
			n, err := number(p, v, true)
			if err != nil {
				return nil, err
			}
			want[i] = n
		case kString, kSet:
			s, ok := v.(string)
			if !ok {
				return nil, bad(p, "must be a string, got %s", show(v))
			}
			if err := checkString(p, s); err != nil {
				return nil, err
			}
			want[i] = s
		default: // kAny
			switch x := v.(type) {
			case json.Number:
				n, err := number(p, x, false)
				if err != nil {
					return nil, err
				}
				want[i] = n
			case string:
				if err := checkString(p, x); err != nil {
					return nil, err
				}
				want[i] = x
			case bool:
				want[i] = x
			default:
				return nil, bad(p, "must be a string, a number or a boolean, got %s", show(v))
			}
		}
	}
	return want, nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func anyOf[T any](list []T, f func(T) bool) bool {
	for _, x := range list {
		if f(x) {
			return true
		}
	}
	return false
}

// inLocation is $in_location: the value, a geopoint ("geo:<lat>,<lng>"),
// lies in one of the named locations (loc_…). The locations' shapes are
// not the rule's: they are read when it runs (Input.Locations), so the
// condition keeps their ids.
func (c *compiler) inLocation(cd *cond, path string, vals []any) error {
	if len(vals) == 0 {
		return bad(path, "takes the ids of one or more locations")
	}
	for i, v := range vals {
		id, ok := v.(string)
		if !ok || strings.TrimSpace(id) == "" {
			return bad(fmt.Sprintf("%s[%d]", path, i), "must be a location id (loc_…)")
		}
		cd.locs = append(cd.locs, id)
		c.locations = append(c.locations, id)
	}
	return nil
}
