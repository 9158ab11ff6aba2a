package targeting

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What each operator means, the same in Match and in Where (now is the
// moment of the evaluation; days are UTC days):
//
//	$is $in                a value is one of the values
//	$contains              the text contains one of the values
//	$starts_with $ends_with
//	$more_than …_equal     a number compared (metadata numbers)
//	$after $before         a date (by day) or a timestamp, compared
//	$more_than_ago n       before n days ago; $less_than_ago n: since then, up to now
//	$more_than_future n    after n days from now; $less_than_future n: from now, before then
//	$is_days_ago n         on the day n days ago; $is_days_in_future n: n days ahead
//	$has_value             present (metadata: present and not null)
//	$count n               a metadata array has n elements; $count_less, $count_more: fewer, more
//	                       events.<name>.count takes them on the count of a customer's events,
//	                       and the number operators and $is, $in on it too (0 when none)
//	$in_location ids       a metadata geopoint, or one of an array of them, lies in one of the
//	                       locations (places.go)
//
// A negative operator ($is_not, $not_in, $not_contain, $is_unknown) holds
// exactly where its positive one does not, a missing value included. A
// metadata value takes the text operators when it is a string, number or
// boolean (numbers written as JSON writes them), the number operators when
// it is a number, the date operators when it is a string that starts with
// a date.

var datePrefix = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}`)

// Match says whether r satisfies the filter at now.
func (f *Filter[T]) Match(r T, now time.Time, s Schema[T]) bool {
	if len(f.conds) == 0 {
		return true
	}
	for _, c := range f.conds {
		ok := c.match(r, now, s)
		if f.or && ok {
			return true
		}
		if !f.or && !ok {
			return false
		}
	}
	return !f.or
}

func (c cond[T]) match(r T, now time.Time, s Schema[T]) bool {
	if pos, neg := negations[c.op]; neg {
		d := c
		d.op = pos
		return !d.match(r, now, s)
	}
	var v any
	if c.event != "" {
		n := s.Events(r, c.event)
		switch {
		case countOps[c.op]:
			return counted(c.op, n, c.count)
		case numberOps[c.op]:
			return compare(c.op, float64(n), c.nums[0])
		}
		return c.matchText(strconv.Itoa(n))
	}
	if c.meta != "" {
		md := s.Metadata(r)
		if md == nil {
			return false
		}
		v = md[c.meta]
	} else {
		v = c.field.Get(r)
	}
	if v == nil {
		return false
	}
	if c.op == "$has_value" {
		return true
	}
	if c.op == inLocation {
		return c.within(v)
	}
	if countOps[c.op] {
		l, ok := v.([]any)
		return ok && counted(c.op, len(l), c.count)
	}
	if t, ok := v.(time.Time); ok {
		return c.matchTime(t, now)
	}
	text, isText := textOf(v)
	switch {
	case textOps[c.op]:
		return isText && c.matchText(text)
	case numberOps[c.op]:
		n, ok := v.(float64)
		return ok && compare(c.op, n, c.nums[0])
	case dateOps[c.op]:
		str, ok := v.(string)
		if !ok || !datePrefix.MatchString(str) {
			return false
		}
		return c.matchDay(str[:10], now)
	}
	return false
}

// textOf is a value's text for the text operators.
func textOf(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func (c cond[T]) matchText(s string) bool {
	return slices.ContainsFunc(c.texts, func(t string) bool {
		switch c.op {
		case "$contains":
			return strings.Contains(s, t)
		case "$starts_with":
			return strings.HasPrefix(s, t)
		case "$ends_with":
			return strings.HasSuffix(s, t)
		}
		return s == t
	})
}

func compare(op string, a, b float64) bool {
	switch op {
	case "$more_than":
		return a > b
	case "$less_than":
		return a < b
	case "$more_than_equal":
		return a >= b
	}
	return a <= b
}

// matchDay compares a YYYY-MM-DD day.
func (c cond[T]) matchDay(d string, now time.Time) bool {
	today := day(now, 0)
	switch c.op {
	case "$after":
		return d > c.texts[0]
	case "$before":
		return d < c.texts[0]
	case "$more_than_ago":
		return d < day(now, -c.days)
	case "$less_than_ago":
		return d > day(now, -c.days) && d <= today
	case "$more_than_future":
		return d > day(now, c.days)
	case "$less_than_future":
		return d >= today && d < day(now, c.days)
	case "$is_days_ago":
		return d == day(now, -c.days)
	case "$is_days_in_future":
		return d == day(now, c.days)
	}
	return false
}

func (c cond[T]) matchTime(t, now time.Time) bool {
	lo, hi, ok := c.timeRange(now)
	return ok && (lo.IsZero() || t.After(lo) || (c.loInclusive() && t.Equal(lo))) &&
		(hi.IsZero() || t.Before(hi) || (c.hiInclusive() && t.Equal(hi)))
}

// timeRange is the interval of timestamps a date operator accepts (a zero
// bound: open).
func (c cond[T]) timeRange(now time.Time) (lo, hi time.Time, ok bool) {
	d := time.Duration(c.days) * 24 * time.Hour
	switch c.op {
	case "$after":
		return c.at, time.Time{}, true
	case "$before":
		return time.Time{}, c.at, true
	case "$more_than_ago":
		return time.Time{}, now.Add(-d), true
	case "$less_than_ago":
		return now.Add(-d), now, true
	case "$more_than_future":
		return now.Add(d), time.Time{}, true
	case "$less_than_future":
		return now, now.Add(d), true
	case "$is_days_ago":
		return midnight(now, -c.days), midnight(now, -c.days+1), true
	case "$is_days_in_future":
		return midnight(now, c.days), midnight(now, c.days+1), true
	}
	return time.Time{}, time.Time{}, false
}

// The bounds a range includes: up to now ($less_than_ago), from now
// ($less_than_future) and a day's midnight.
func (c cond[T]) loInclusive() bool {
	return c.op == "$less_than_future" || c.op == "$is_days_ago" || c.op == "$is_days_in_future"
}

func (c cond[T]) hiInclusive() bool { return c.op == "$less_than_ago" }

// Where is the filter as an SQL condition over the schema's table, its
// values given to arg (which answers their placeholder, $n).
func (f *Filter[T]) Where(arg func(any) string, now time.Time, s Schema[T]) string {
	if len(f.conds) == 0 {
		return "TRUE"
	}
	parts := make([]string, len(f.conds))
	for i, c := range f.conds {
		parts[i] = "(" + c.where(arg, now, s) + ")"
	}
	j := " AND "
	if f.or {
		j = " OR "
	}
	return "(" + strings.Join(parts, j) + ")"
}

func (c cond[T]) where(arg func(any) string, now time.Time, s Schema[T]) string {
	if pos, neg := negations[c.op]; neg {
		d := c
		d.op = pos
		return "NOT COALESCE(" + d.where(arg, now, s) + ", FALSE)"
	}
	if c.event != "" {
		return c.whereEvent(arg, s)
	}
	// text: the value as text (NULL when it has none); typ: its JSON type
	// for metadata ("" for a fixed path).
	var text, typ, value string
	if c.meta != "" {
		k := arg(c.meta) + "::TEXT"
		value = "(" + s.MetadataSQL + "->" + k + ")"
		typ = "jsonb_typeof" + value
		text = "(" + s.MetadataSQL + "->>" + k + ")"
	} else {
		text = "(" + c.field.SQL + ")"
		if c.field.Kind == Number && textOps[c.op] {
			text = "(" + c.field.SQL + ")::TEXT" // the number as Match writes it
		}
	}
	if c.op == "$has_value" {
		if typ != "" {
			return "COALESCE(" + typ + ", 'null') <> 'null'"
		}
		return text + " IS NOT NULL"
	}
	if c.op == inLocation {
		return c.whereIn(arg, typ, text)
	}
	if countOps[c.op] {
		return "CASE WHEN " + typ + " = 'array' THEN jsonb_array_length" + value + " END " +
			map[string]string{"$count": "=", "$count_less": "<", "$count_more": ">"}[c.op] + " " + arg(c.count)
	}
	if c.meta == "" && c.field.Kind == DateTime {
		lo, hi, _ := c.timeRange(now)
		var out []string
		if !lo.IsZero() {
			cmp := " > "
			if c.loInclusive() {
				cmp = " >= "
			}
			out = append(out, text+cmp+arg(lo))
		}
		if !hi.IsZero() {
			cmp := " < "
			if c.hiInclusive() {
				cmp = " <= "
			}
			out = append(out, text+cmp+arg(hi))
		}
		return strings.Join(out, " AND ")
	}
	switch {
	case textOps[c.op]:
		guard := ""
		if typ != "" {
			guard = typ + " IN ('string', 'number', 'boolean') AND "
		}
		var alts []string
		for _, t := range c.texts {
			p := arg(t) + "::TEXT"
			switch c.op {
			case "$contains":
				alts = append(alts, "strpos("+text+", "+p+") > 0")
			case "$starts_with":
				alts = append(alts, "left("+text+", length("+p+")) = "+p)
			case "$ends_with":
				alts = append(alts, "right("+text+", length("+p+")) = "+p)
			default:
				alts = append(alts, text+" = "+p)
			}
		}
		return guard + "(" + strings.Join(alts, " OR ") + ")"
	case numberOps[c.op]:
		ops := map[string]string{"$more_than": ">", "$less_than": "<", "$more_than_equal": ">=", "$less_than_equal": "<="}
		if typ == "" { // a Number path
			return text + "::DECIMAL " + ops[c.op] + " " + arg(c.texts[0]) + "::DECIMAL"
		}
		return "CASE WHEN " + typ + " = 'number' THEN " + text + "::DECIMAL END " + ops[c.op] + " " + arg(c.texts[0]) + "::DECIMAL"
	}
	// a date: the day the text starts with, compared as YYYY-MM-DD text
	guard := ""
	if typ != "" {
		guard = typ + " = 'string' AND "
	}
	d := "left(" + text + ", 10)"
	guard += text + " ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}' AND "
	day := func(n int) string { return arg(day(now, n)) + "::TEXT" }
	switch c.op {
	case "$after":
		return guard + d + " > " + arg(c.texts[0]) + "::TEXT"
	case "$before":
		return guard + d + " < " + arg(c.texts[0]) + "::TEXT"
	case "$more_than_ago":
		return guard + d + " < " + day(-c.days)
	case "$less_than_ago":
		return guard + d + " > " + day(-c.days) + " AND " + d + " <= " + day(0)
	case "$more_than_future":
		return guard + d + " > " + day(c.days)
	case "$less_than_future":
		return guard + d + " >= " + day(0) + " AND " + d + " < " + day(c.days)
	case "$is_days_ago":
		return guard + d + " = " + day(-c.days)
	}
	return guard + d + " = " + day(c.days) // $is_days_in_future
}

// counted compares an array's length n with a $count… condition's m.
func counted(op string, n, m int) bool {
	switch op {
	case "$count_less":
		return n < m
	case "$count_more":
		return n > m
	}
	return n == m
}

// whereEvent is an events.<name>.count condition: the count's SQL (the
// schema's EventsSQL) compared.
func (c cond[T]) whereEvent(arg func(any) string, s Schema[T]) string {
	n := "(" + s.EventsSQL(arg(c.event)) + ")"
	switch {
	case countOps[c.op]:
		return n + " " + map[string]string{"$count": "=", "$count_less": "<", "$count_more": ">"}[c.op] + " " + arg(c.count)
	case numberOps[c.op]:
		ops := map[string]string{"$more_than": ">", "$less_than": "<", "$more_than_equal": ">=", "$less_than_equal": "<="}
		return n + "::DECIMAL " + ops[c.op] + " " + arg(c.texts[0]) + "::DECIMAL"
	}
	alts := make([]string, len(c.texts))
	for i, t := range c.texts {
		alts[i] = n + "::TEXT = " + arg(t) + "::TEXT"
	}
	return "(" + strings.Join(alts, " OR ") + ")"
}
