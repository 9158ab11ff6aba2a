// Package targeting is the interface's filter language over the
// attributes of one kind of record (customers for segments; products
// next, for collections):
//
//	{"junction": "and", "address.city": {"conditions": {"$in": ["Berlin", "Paris"]}},
//	 "metadata.tier": {"conditions": {"$is": ["gold"]}}}
//
// Parse reads it once against a Schema, refusing an unknown path or
// operator with a 400 naming it, into a Filter that answers both ways a
// record's membership is decided: Where is an SQL condition over the
// records' table (set-based recomputation of many), Match a predicate over
// one record in memory (a single change, or a request's data). The two
// must agree on every record; the package's tests cross-check them on
// PostgreSQL.
package targeting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/geo"
)

// Kind is the type of a path, which decides its operators.
type Kind int

const (
	// String paths (name, email, address.city) take the text operators.
	String Kind = iota
	// Date paths hold YYYY-MM-DD text (birthdate): the text operators and
	// the date ones, compared by day.
	Date
	// DateTime paths are timestamps (created_at): the date operators.
	DateTime
	// Number paths are numbers (a product's price): the number operators,
	// and the text ones on the number as JSON writes it.
	Number
	// any is a metadata value: text, number and date operators, each
	// applying to the values of its type.
	anyKind
	// countKind is events.<name>.count, a whole number 0 or more: the
	// counting operators, the number ones and equality.
	countKind
)

// Field is a fixed path of a schema: its kind, its SQL expression over the
// records' table (TEXT for String and Date, TIMESTAMPTZ for DateTime) and
// its value in a record (nil, string, float64 or time.Time).
type Field[T any] struct {
	Kind Kind
	SQL  string
	Get  func(T) any
}

// Schema is what a filter may name of one kind of record: its fixed paths
// and, under metadata.<key>, its metadata (the JSONB expression and the
// record's map).
//
// Events, when set, serves events.<name>.count: a record's count of the
// custom events of a name it sent (0 when none); EventsSQL is that count
// as an SQL expression over the records' table, given the placeholder of
// the name. Parse needs only Events; Where needs EventsSQL for a filter
// that names events (the caller that owns the counts supplies it).
type Schema[T any] struct {
	Fields      map[string]Field[T]
	MetadataSQL string
	Metadata    func(T) map[string]any
	Events      func(r T, name string) int
	EventsSQL   func(name string) string
}

// Operators by what they compare.
var (
	textOps   = set("$is", "$is_not", "$in", "$not_in", "$contains", "$not_contain", "$starts_with", "$ends_with")
	numberOps = set("$more_than", "$less_than", "$more_than_equal", "$less_than_equal")
	dateOps   = set("$after", "$before", "$more_than_ago", "$less_than_ago", "$more_than_future", "$less_than_future",
		"$is_days_ago", "$is_days_in_future")
	presence = set("$has_value", "$is_unknown")
	// counts compare the number of elements of a metadata array.
	countOps = set("$count", "$count_less", "$count_more")
	// negative operators hold where their positive one does not, a
	// missing value included.
	negations = map[string]string{"$is_not": "$is", "$not_in": "$in", "$not_contain": "$contains", "$is_unknown": "$has_value"}
)

// inLocation is the operator of places: a metadata geopoint
// ("geo:<lat>,<lng>", or an array of them of which one must do) lies in
// one of the named locations (loc_…), whose shapes the caller binds
// (Bind) when it evaluates the filter.
const inLocation = "$in_location"

func set(ks ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range ks {
		m[k] = true
	}
	return m
}

func opsOf(k Kind) map[string]bool {
	m := set()
	add := func(s map[string]bool) {
		for k := range s {
			m[k] = true
		}
	}
	add(presence)
	switch k {
	case String:
		add(textOps)
	case Date:
		add(textOps)
		add(dateOps)
	case DateTime:
		add(dateOps)
	case Number:
		add(textOps)
		add(numberOps)
	case countKind:
		add(countOps)
		add(numberOps)
		add(set("$is", "$is_not", "$in", "$not_in"))
		delete(m, "$has_value") // a count is always there, 0 at least
		delete(m, "$is_unknown")
	case anyKind:
		add(textOps)
		add(numberOps)
		add(dateOps)
		add(countOps)
		m[inLocation] = true
	}
	return m
}

// Filter is a parsed filter.
type Filter[T any] struct {
	or    bool
	conds []cond[T]
	raw   json.RawMessage
}

type cond[T any] struct {
	shapes map[string]geo.Shape // $in_location: the bound locations' shapes (Bind)
	path   string
	field  Field[T] // for a fixed path
	meta   string   // the metadata key, for metadata.<key>
	event  string   // the event's name, for events.<name>.count
	op     string
	texts  []string
	nums   []float64
	days   int
	count  int       // $count…: the number of elements
	at     time.Time // $after / $before of a DateTime
}

// Raw is the filter as it was given, to store and show.
func (f *Filter[T]) Raw() json.RawMessage { return f.raw }

// EventNames are the names of the events whose counts the filter
// compares (events.<name>.count), each once: what a caller loads into the
// records it matches.
func (f *Filter[T]) EventNames() []string {
	var out []string
	for _, c := range f.conds {
		if c.event != "" && !slices.Contains(out, c.event) {
			out = append(out, c.event)
		}
	}
	return out
}

// Empty says the filter has no condition: every record matches.
func (f *Filter[T]) Empty() bool { return len(f.conds) == 0 }

// Parse reads a filter. param names it in errors (filter): a problem is a
// 400 invalid_payload whose details name the path and the operator.
func Parse[T any](raw json.RawMessage, s Schema[T], param string) (*Filter[T], error) {
	bad := func(where, problem string) error {
		return apierr.InvalidPayload(fmt.Sprintf("%s: %s", where, problem))
	}
	raw = bytes.TrimSpace(raw)
	var top map[string]json.RawMessage
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &top) != nil {
		return nil, bad(param, `must be an object of conditions by path, such as {"junction": "and", "address.city": {"conditions": {"$is": ["Berlin"]}}}`)
	}
	f := &Filter[T]{raw: append(json.RawMessage(nil), raw...)}
	paths := make([]string, 0, len(top))
	for k := range top {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	for _, path := range paths {
		v := top[path]
		where := param + "." + path
		if path == "junction" {
			var j string
			if json.Unmarshal(v, &j) != nil || (strings.ToLower(j) != "and" && strings.ToLower(j) != "or") {
				return nil, bad(where, "must be and or or")
			}
			f.or = strings.ToLower(j) == "or"
			continue
		}
		c := cond[T]{path: path}
		kind := anyKind
		if key, ok := strings.CutPrefix(path, "metadata."); ok && key != "" && s.Metadata != nil {
			c.meta = key
		} else if fd, ok := s.Fields[path]; ok {
			c.field, kind = fd, fd.Kind
		} else if rest, ok := strings.CutPrefix(path, "events."); ok {
			name, ok := strings.CutSuffix(rest, ".count")
			if s.Events == nil {
				return nil, bad(where, "these records have no events to count")
			}
			if !ok || name == "" {
				return nil, bad(where, "an event path is events.<name>.count, the number of custom events of that name the customer sent")
			}
			c.event, kind = name, countKind
		} else {
			return nil, bad(where, "unknown path; known: "+strings.Join(known(s), ", ")+", metadata.<key>")
		}
		var body struct {
			Conditions map[string]json.RawMessage `json:"conditions"`
		}
		if json.Unmarshal(v, &body) != nil || body.Conditions == nil {
			return nil, bad(where, `must be an object such as {"conditions": {"$is": ["…"]}}`)
		}
		ops := make([]string, 0, len(body.Conditions))
		for op := range body.Conditions {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		for _, op := range ops {
			cw := where + ".conditions." + op
			if !opsOf(kind)[op] {
				return nil, bad(cw, "unknown operator for this path; it takes "+strings.Join(sorted(opsOf(kind)), ", "))
			}
			cc := c
			cc.op = op
			if err := cc.values(body.Conditions[op], kind); err != nil {
				return nil, bad(cw, err.Error())
			}
			f.conds = append(f.conds, cc)
		}
	}
	return f, nil
}

// values reads an operator's values: an array or a single value.
func (c *cond[T]) values(raw json.RawMessage, kind Kind) error {
	if presence[c.op] {
		return nil
	}
	var vs []any
	if json.Unmarshal(raw, &vs) != nil {
		var one any
		if json.Unmarshal(raw, &one) != nil {
			return fmt.Errorf("must be an array of values")
		}
		vs = []any{one}
	}
	if len(vs) == 0 {
		return fmt.Errorf("needs a value")
	}
	if c.op == inLocation {
		for i, v := range vs {
			id, ok := v.(string)
			if !ok || strings.TrimSpace(id) == "" {
				return fmt.Errorf("[%d] must be a location id (loc_…)", i)
			}
			c.texts = append(c.texts, id)
		}
		return nil
	}
	for _, v := range vs {
		switch x := v.(type) {
		case string:
			c.texts = append(c.texts, x)
		case float64:
			c.texts = append(c.texts, strconv.FormatFloat(x, 'f', -1, 64))
		case bool:
			c.texts = append(c.texts, strconv.FormatBool(x))
		default:
			return fmt.Errorf("values must be strings, numbers or booleans")
		}
	}
	switch {
	case numberOps[c.op]:
		n, err := strconv.ParseFloat(c.texts[0], 64)
		if err != nil {
			return fmt.Errorf("must be a number, got %q", c.texts[0])
		}
		c.nums = []float64{n}
	case countOps[c.op]:
		n, err := strconv.Atoi(c.texts[0])
		if err != nil || n < 0 {
			return fmt.Errorf("must be a count of elements (0 or more), got %q", c.texts[0])
		}
		c.count = n
	case kind == countKind:
		// $is and $in compare the count with whole numbers
		for _, t := range c.texts {
			if _, err := strconv.Atoi(t); err != nil {
				return fmt.Errorf("must be a whole number of events, got %q", t)
			}
		}
	case c.op == "$after" || c.op == "$before":
		t, err := parseTime(c.texts[0])
		if err != nil {
			return fmt.Errorf("must be a date (YYYY-MM-DD) or date-time, got %q", c.texts[0])
		}
		c.at = t
		if kind != DateTime {
			c.texts = []string{t.Format(time.DateOnly)}
		}
	case dateOps[c.op]:
		n, err := strconv.Atoi(c.texts[0])
		if err != nil || n < 0 || n > 100000 {
			return fmt.Errorf("must be a number of days (0 to 100000), got %q", c.texts[0])
		}
		c.days = n
	case len(c.texts) > 1 && (c.op == "$is" || c.op == "$is_not" || c.op == "$contains" || c.op == "$not_contain" ||
		c.op == "$starts_with" || c.op == "$ends_with"):
		// several values: any of them (none of them, negated), as $in
	}
	return nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Parse(time.DateOnly, s)
}

func known[T any](s Schema[T]) []string {
	out := make([]string, 0, len(s.Fields))
	for k := range s.Fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// day is the UTC day of t shifted by n days, as YYYY-MM-DD.
func day(t time.Time, n int) string { return t.UTC().AddDate(0, 0, n).Format(time.DateOnly) }

// midnight is the start of the UTC day of t shifted by n days.
func midnight(t time.Time, n int) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+n, 0, 0, 0, 0, time.UTC)
}
