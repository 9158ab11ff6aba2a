// Package filters parses the interface's `filters` query parameter (style
// deepObject) and turns it into SQL conditions.
//
// Real clients send it in several spellings, all accepted:
//
//	filters[created_at][conditions][$after]=2024-01-01T00:00:00Z
//	filters[created_at][conditions][$after][0]=2024-01-01T00:00:00Z
//	filters[id][conditions][$in][0]=a&filters[id][conditions][$in][1]=b
//	filters[id][conditions][$in][]=a&filters[id][conditions][$in][]=b
//	filters[id][$is]=a                      (without [conditions])
//	filters[junction]=or
//
// with the brackets raw or percent-encoded (the query parser decodes both).
// Anything else is a 400 invalid_query_params naming the parameter.
package filters

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tallyhq/tally/internal/apierr"
)

// Kind is the type of a filterable field, which decides its conditions.
type Kind int

const (
	// String fields take the string conditions.
	String Kind = iota
	// DateTime fields take the date-time conditions.
	DateTime
)

var conditions = map[Kind]map[string]bool{
	String: {"$in": true, "$not_in": true, "$is": true, "$is_not": true, "$has_value": true, "$is_unknown": true,
		"$starts_with": true, "$ends_with": true, "$contains": true, "$not_contain": true},
	DateTime: {"$after": true, "$before": true, "$has_value": true, "$is_unknown": true, "$more_than": true, "$less_than": true},
}

// Field is a filterable field: its name in the query and its SQL column.
type Field struct {
	Kind   Kind
	Column string
	// Also, when set, holds more values of the field in other rows: an
	// SQL condition with one %s, true when one of those rows satisfies
	// the condition put there on AlsoColumn (a correlated EXISTS). A
	// condition then holds when the column or one of those values
	// satisfies it; a negative one ($is_not, $not_in, $not_contain,
	// $is_unknown) when none does.
	Also, AlsoColumn string
}

// negations are the negative conditions and the positive ones they deny.
var negations = map[string]string{"$not_in": "$in", "$is_not": "$is", "$not_contain": "$contains", "$is_unknown": "$has_value"}

// Cond is one condition on one field.
type Cond struct {
	Field  string
	Op     string
	Values []string // one value, except for $in and $not_in
	param  string   // the query parameter, for error messages
	time   time.Time
	days   int
}

// Filter is a parsed `filters` parameter.
type Filter struct {
	Or    bool // junction: and (default) or or
	Conds []Cond
}

// Empty reports whether the filter has no conditions.
func (f Filter) Empty() bool { return len(f.Conds) == 0 }

// Parse reads the filters of q against the allowed fields.
func Parse(q url.Values, fields map[string]Field) (Filter, error) {
	var f Filter
	type key struct{ field, op string }
	values := map[key][]string{}
	params := map[key]string{}
	var keys []string
	for k := range q {
		if k == "filters" || strings.HasPrefix(k, "filters[") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // deterministic errors, and [0] before [1]
	for _, k := range keys {
		parts, ok := brackets(strings.TrimPrefix(k, "filters"))
		if !ok || len(parts) == 0 {
			return Filter{}, apierr.InvalidQuery(k, "expected filters[<field>][conditions][<condition>]=<value>")
		}
		if parts[0] == "junction" {
			if len(parts) != 1 {
				return Filter{}, apierr.InvalidQuery(k, "junction takes a value: and or or")
			}
			switch v := strings.ToLower(q.Get(k)); v {
			case "and":
			case "or":
				f.Or = true
			default:
				return Filter{}, apierr.InvalidQuery(k, "must be and or or, got "+strconv.Quote(q.Get(k)))
			}
			continue
		}
		field, ok := fields[parts[0]]
		if !ok {
			return Filter{}, apierr.InvalidQuery(k, fmt.Sprintf("cannot filter by %q; filterable: %s", parts[0], names(fields)))
		}
		rest := parts[1:]
		if len(rest) > 0 && rest[0] == "conditions" {
			rest = rest[1:]
		}
		if len(rest) == 0 || len(rest) > 2 {
			return Filter{}, apierr.InvalidQuery(k, "expected filters["+parts[0]+"][conditions][<condition>]")
		}
		op := rest[0]
		if !conditions[field.Kind][op] {
			return Filter{}, apierr.InvalidQuery(k, fmt.Sprintf("%q is not a condition of %s", op, parts[0]))
		}
		if len(rest) == 2 { // [0], [1], [] …
			if rest[1] != "" {
				if n, err := strconv.Atoi(rest[1]); err != nil || n < 0 || n > 1000 {
					return Filter{}, apierr.InvalidQuery(k, "expected an index after the condition, as in [$in][0]")
				}
			}
		}
		kk := key{parts[0], op}
		values[kk] = append(values[kk], q[k]...)
		if _, seen := params[kk]; !seen {
			params[kk] = k
		}
	}
	var ks []key
	for k := range values {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].field != ks[j].field {
			return ks[i].field < ks[j].field
		}
		return ks[i].op < ks[j].op
	})
	for _, k := range ks {
		c := Cond{Field: k.field, Op: k.op, Values: values[k], param: params[k]}
		if err := c.check(fields[k.field].Kind); err != nil {
			return Filter{}, err
		}
		f.Conds = append(f.Conds, c)
	}
	if len(f.Conds) > 50 {
		return Filter{}, apierr.InvalidQuery("filters", "at most 50 conditions")
	}
	return f, nil
}

// check validates a condition's values and parses them.
func (c *Cond) check(kind Kind) error {
	for _, v := range c.Values {
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return apierr.InvalidQuery(c.param, "values must be UTF-8 text without NUL characters")
		}
	}
	switch c.Op {
	case "$in", "$not_in":
		if len(c.Values) > 100 {
			return apierr.InvalidQuery(c.param, "at most 100 values")
		}
		return nil
	case "$has_value", "$is_unknown":
		return nil // the value, if any, is ignored
	}
	if len(c.Values) != 1 {
		return apierr.InvalidQuery(c.param, "takes one value")
	}
	v := c.Values[0]
	switch c.Op {
	case "$after", "$before":
		t, err := parseTime(v)
		if err != nil {
			return apierr.InvalidQuery(c.param, "must be a date-time such as 2024-01-31T12:00:00Z, got "+strconv.Quote(v))
		}
		c.time = t
	case "$more_than", "$less_than":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100000 {
			return apierr.InvalidQuery(c.param, "must be a whole number of days, got "+strconv.Quote(v))
		}
		c.days = n
	}
	if kind == String && len(v) > 1000 {
		return apierr.InvalidQuery(c.param, "at most 1000 characters")
	}
	return nil
}

func parseTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a date-time")
}

// brackets splits "[a][b][]" into a, b, "". ok is false for anything else.
func brackets(s string) ([]string, bool) {
	var parts []string
	for s != "" {
		if s[0] != '[' {
			return nil, false
		}
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return nil, false
		}
		parts = append(parts, s[1:end])
		s = s[end+1:]
	}
	return parts, true
}

func names(fields map[string]Field) string {
	var ns []string
	for n := range fields {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ", ")
}

// SQL renders the filter as a condition over fields' columns, numbering
// its parameters after the n already in args, and returns the grown args.
// An empty filter is "TRUE".
func (f Filter) SQL(fields map[string]Field, args []any, now time.Time) (string, []any) {
	if f.Empty() {
		return "TRUE", args
	}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var parts []string
	for _, c := range f.Conds {
		field := fields[c.Field]
		op, negated := c.Op, false
		if pos, ok := negations[op]; ok {
			op, negated = pos, true
		}
		p := condition(c, op, field.Column, arg, now)
		if field.Also != "" {
			p = "(COALESCE(" + p + ", FALSE) OR " + fmt.Sprintf(field.Also, condition(c, op, field.AlsoColumn, arg, now)) + ")"
		}
		if negated {
			p = "NOT (" + p + ")"
			if field.Also != "" && op != "$has_value" {
				// Like a column without a value, a row with no value
				// at all satisfies no negative condition but $is_unknown.
				p = "(" + p + " AND (" + field.Column + " IS NOT NULL OR " + fmt.Sprintf(field.Also, "TRUE") + "))"
			}
		}
		parts = append(parts, p)
	}
	junction := " AND "
	if f.Or {
		junction = " OR "
	}
	return "(" + strings.Join(parts, junction) + ")", args
}

// condition is the positive condition op of c on col.
func condition(c Cond, op, col string, arg func(any) string, now time.Time) string {
	switch op {
	case "$in":
		return col + " = ANY(" + arg(c.Values) + "::TEXT[])"
	case "$is":
		return col + " = " + arg(c.Values[0])
	case "$has_value":
		return col + " IS NOT NULL"
	case "$starts_with":
		return col + " LIKE " + arg(escapeLike(c.Values[0])+"%")
	case "$ends_with":
		return col + " LIKE " + arg("%"+escapeLike(c.Values[0]))
	case "$contains":
		return col + " LIKE " + arg("%"+escapeLike(c.Values[0])+"%")
	case "$after":
		return col + " > " + arg(c.time)
	case "$before":
		return col + " < " + arg(c.time)
	case "$more_than": // more than n days ago
		return col + " < " + arg(now.AddDate(0, 0, -c.days))
	case "$less_than":
		return col + " > " + arg(now.AddDate(0, 0, -c.days))
	}
	panic("filters: no SQL for condition " + op) // parse admits only the ones above
}

// escapeLike escapes LIKE's wildcards with the default escape, a backslash.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
