package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tallyhq/tally/internal/apierr"
)

// The rule language. A rule's `rules` is an object of numbered (or named)
// conditions and a `logic` expression over their keys:
//
//	{"1": {"name": "order.amount", "conditions": {"$more_than": [5000]},
//	       "error": {"message": "…"}, "rules": {…nested, same shape…}},
//	 "logic": "1 and (2 or 3)"}
//
// compile checks it once, when it is written, and turns it into a program
// evaluated in memory (eval.go); nothing is parsed per evaluation.

// Limits of one rule.
const (
	maxDepth      = 5        // levels of nested rules
	maxConditions = 300      // conditions in all levels together
	maxValues     = 1000     // values of one condition
	maxAllValues  = 5000     // values of all conditions together
	maxDocument   = 64 << 10 // bytes of the rules, error and applicable_to documents together
	maxText       = 1000     // characters of a string value, a message, the logic
	maxKey        = 64       // characters of a condition's key
	maxSafeInt    = 1<<53 - 1
)

// kind is what a name's value is, and so which conditions it takes.
type kind int

const (
	kInt    kind = iota // a whole number: an amount in cents, a count, a quantity
	kString             // text: an id
	kAny                // a metadata value: text, a number, a boolean, a date in text, a list
	kSet                // a set of strings: the customer's segments
	kItems              // the order's items, matched against products, SKUs, collections
	kTime               // the evaluation time
)

// quant is how a name that reads a list of values (each item's price)
// applies a rule's conditions: to one of them or to each.
type quant int

const (
	qOne quant = iota
	qAny
	qEach
)

// items modes of order.items.any, every and none.
type itemsMode int

const (
	itemsAny itemsMode = iota + 1
	itemsEvery
	itemsNone
)

// name is one rule name the language knows.
type name struct {
	kind  kind
	prop  bool // takes a property: the metadata key (or name.<key>)
	item  bool // read from one order item: only inside order.items.any/every/none
	quant quant
	mode  itemsMode
	read  func(s *scope, prop string) any
}

// names are the rule names served. Metadata names take their key as
// `property` (the reference's form) or after a dot (order.metadata.color).
var names = map[string]name{
	"order.amount":                    {kind: kInt, read: readOrder(func(o *Order) any { return num(o.amount()) })},
	"order.initial_amount":            {kind: kInt, read: readOrder(func(o *Order) any { return num(o.initialAmount()) })},
	"order.items.count":               {kind: kInt, read: readOrder(func(o *Order) any { return num(int64(len(o.Items))) })},
	"order.items.quantity":            {kind: kInt, read: readItemsQuantity},
	"order.items.aggregated_quantity": {kind: kInt, read: readAggregatedQuantity},
	"order.items.aggregated_amount":   {kind: kInt, read: readAggregatedAmount},
	"order.items.price_any":           {kind: kInt, quant: qAny, read: readPrices},
	"order.items.price_each":          {kind: kInt, quant: qEach, read: readPrices},
	"order.items.price":               {kind: kInt, item: true, read: func(s *scope, _ string) any { return num(s.item.Price) }},
	"order.items.amount":              {kind: kInt, item: true, read: func(s *scope, _ string) any { return num(s.item.amount()) }},
	"order.items.metadata":            {kind: kAny, prop: true, item: true, read: func(s *scope, p string) any { return meta(s.item.Metadata, p) }},
	"order.items.any":                 {kind: kItems, mode: itemsAny},
	"order.items.every":               {kind: kItems, mode: itemsEvery},
	"order.items.none":                {kind: kItems, mode: itemsNone},
	"order.metadata":                  {kind: kAny, prop: true, read: func(s *scope, p string) any { return orderMeta(s, p) }},
	"customer.id":                     {kind: kString, read: readCustomer(func(c *Customer, _ string) any { return text(c.ID) })},
	"customer.source_id":              {kind: kString, read: readCustomer(func(c *Customer, _ string) any { return text(c.SourceID) })},
	"customer.metadata":               {kind: kAny, prop: true, read: readCustomer(func(c *Customer, p string) any { return meta(c.Metadata, p) })},
	"customer.segment":                {kind: kSet, read: readCustomer(func(c *Customer, _ string) any { return strs(c.Segments) })},
	"custom_event.metadata":           {kind: kAny, prop: true, read: readEventMeta},
	"redemption.metadata":             {kind: kAny, prop: true, read: func(s *scope, p string) any { return meta(s.in.Metadata, p) }},
	"redemption.count.per_customer":   {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerCustomer + 1) }},
	"redemption.count.per_campaign":   {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerCampaign + 1) }},
	"redemption.count.per_day":        {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerDay + 1) }},
	"date":                            {kind: kTime, read: func(s *scope, _ string) any { return s.now() }},
}

// Names lists the rule names served, sorted.
func Names() []string {
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ops are the conditions, by the name a rule gives; aliases the reference's
// examples and guides use map to the one they mean.
var ops = map[string]string{
	"$is": "$is", "$is_not": "$is_not", "$in": "$in", "$not_in": "$not_in",
	"$more_than": "$more_than", "$more_than_equal": "$more_than_equal",
	"$more_than_or_equal": "$more_than_equal", "$greater_than_or_equal": "$more_than_equal",
	"$less_than": "$less_than", "$less_than_equal": "$less_than_equal", "$less_than_or_equal": "$less_than_equal",
	"$contains": "$contains", "$not_contain": "$not_contain", "$starts_with": "$starts_with", "$ends_with": "$ends_with",
	"$is_unknown": "$is_unknown", "$has_value": "$has_value", "$after": "$after", "$before": "$before",
}

// opsOf are the conditions each kind takes.
var opsOf = map[kind][]string{
	kInt: {"$is", "$is_not", "$in", "$not_in", "$more_than", "$more_than_equal", "$less_than", "$less_than_equal",
		"$is_unknown", "$has_value"},
	kString: {"$is", "$is_not", "$in", "$not_in", "$contains", "$not_contain", "$starts_with", "$ends_with",
		"$is_unknown", "$has_value"},
	kAny: {"$is", "$is_not", "$in", "$not_in", "$more_than", "$more_than_equal", "$less_than", "$less_than_equal",
		"$contains", "$not_contain", "$starts_with", "$ends_with", "$is_unknown", "$has_value", "$after", "$before"},
	kSet:   {"$is", "$is_not", "$in", "$not_in", "$is_unknown", "$has_value"},
	kItems: {"$is", "$in"},
	kTime:  {"$after", "$before"},
}

// program is a compiled rule.
type program struct {
	root       *group
	counts     bool   // it reads redemption counts (redemption.count.*)
	message    string // the rule's error.message
	applicable *applicability
}

// group is one level of conditions and the logic over them.
type group struct {
	conds map[string]*cond
	logic expr
}

// cond is one numbered condition.
type cond struct {
	path    string // "1", "3.1": where it is, for the verdict
	spec    name
	prop    string
	tests   []test
	refs    []ref  // order.items.any/every/none: the products, SKUs, collections
	empty   bool   // conditions: {}: the condition holds
	sub     *group // nested rules, nil without
	message string
	// customer: the condition reads the customer (customer.*), which
	// qualifications' scopes tell apart from everything else.
	customer bool
}

// test is one compiled condition on a value (nil: unknown).
type test func(v any) bool

// ref names a product, a SKU or a collection.
type ref struct {
	object   string // product, sku, products_collection; "" matches a product or a SKU
	id       string
	sourceID string
}

// compiler carries a rule's compilation state.
type compiler struct {
	count, values int
	redemptions   bool // a condition reads redemption counts
}

// bad is the 400 naming where a rule is wrong.
func bad(path, format string, args ...any) error {
	return apierr.InvalidPayload(path + ": " + fmt.Sprintf(format, args...))
}

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

// compile checks a rule's documents and compiles them. rules is the rules
// object, errDoc the rule's error object, applicableTo its applicable_to;
// any may be empty.
func compile(rules, errDoc, applicableTo json.RawMessage) (*program, error) {
	// Bounded documents and values bound the compiled rule's memory and an
	// evaluation's work.
	if n := len(rules) + len(errDoc) + len(applicableTo); n > maxDocument {
		return nil, bad("rules", "a rule's documents hold at most %d KB, got %d bytes", maxDocument>>10, n)
	}
	c := &compiler{}
	root, err := c.group("rules", rules, 1, false)
	if err != nil {
		return nil, err
	}
	p := &program{root: root, counts: c.redemptions}
	if p.message, err = message("error", errDoc); err != nil {
		return nil, err
	}
	if p.applicable, err = compileApplicable(applicableTo); err != nil {
		return nil, err
	}
	return p, nil
}

// message reads an error object's message: {"message": "…"}, or null.
func message(path string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var e struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return "", bad(path, "must be an object with a message, or null")
	}
	if isNull(e.Message) {
		return "", nil
	}
	var m string
	if json.Unmarshal(e.Message, &m) != nil {
		return "", bad(path+".message", "must be a string")
	}
	if utf8.RuneCountInString(m) > maxText {
		return "", bad(path+".message", "is longer than %d characters", maxText)
	}
	return m, nil
}

// group compiles a rules object at path.
func (c *compiler) group(path string, raw json.RawMessage, depth int, inItem bool) (*group, error) {
	m, err := decodeObject(path, raw)
	if err != nil {
		return nil, err
	}
	g := &group{conds: map[string]*cond{}}
	var logic, junction string
	for k, v := range m {
		switch k {
		case "logic", "junction":
			var s *string
			if json.Unmarshal(v, &s) != nil {
				return nil, bad(path+"."+k, "must be a string")
			}
			if s != nil && k == "logic" {
				logic = *s
			} else if s != nil {
				junction = *s
			}
			continue
		}
		if err := checkKey(path, k); err != nil {
			return nil, err
		}
		cd, err := c.cond(path+"."+k, v, depth, inItem)
		if err != nil {
			return nil, err
		}
		g.conds[k] = cd
	}
	if utf8.RuneCountInString(logic) > maxText {
		return nil, bad(path+".logic", "is longer than %d characters", maxText)
	}
	if strings.TrimSpace(logic) != "" {
		g.logic, err = parseLogic(logic, g.conds)
		if err != nil {
			return nil, bad(path+".logic", "%s", err)
		}
		return g, nil
	}
	// Without logic every condition must hold; a junction of "or" (any
	// case) asks for one of them.
	keys := sortedKeys(g.conds)
	switch strings.ToLower(strings.TrimSpace(junction)) {
	case "", "and":
		g.logic = and(leaves(keys))
	case "or":
		g.logic = or(leaves(keys))
	default:
		return nil, bad(path+".junction", "must be and or or, got %q", junction)
	}
	return g, nil
}

func leaves(keys []string) []expr {
	out := make([]expr, len(keys))
	for i, k := range keys {
		out[i] = leaf(k)
	}
	return out
}

// sortedKeys orders condition keys as people number them: 2 before 10.
func sortedKeys(m map[string]*cond) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, ea := strconv.Atoi(keys[i])
		b, eb := strconv.Atoi(keys[j])
		switch {
		case ea == nil && eb == nil:
			return a < b
		case ea == nil:
			return true
		case eb == nil:
			return false
		}
		return keys[i] < keys[j]
	})
	return keys
}

// checkKey refuses a condition key the logic could not name.
func checkKey(path, k string) error {
	if k == "" || len(k) > maxKey || strings.IndexFunc(k, func(r rune) bool { return !isWordRune(r) }) >= 0 {
		return bad(path, "a condition's key must be 1 to %d letters, digits, _ or $ (a number such as \"1\"), got %q", maxKey, k)
	}
	if l := strings.ToLower(k); l == "and" || l == "or" {
		return bad(path, "%q cannot be a condition's key: logic reads it as an operator", k)
	}
	return nil
}

func isWordRune(r rune) bool {
	return r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// cond compiles one condition at path.
func (c *compiler) cond(path string, raw json.RawMessage, depth int, inItem bool) (*cond, error) {
	c.count++
	if c.count > maxConditions {
		return nil, bad(path, "a rule holds at most %d conditions", maxConditions)
	}
	m, err := decodeObject(path, raw)
	if err != nil || len(m) == 0 {
		return nil, bad(path, "must be a condition: an object with name and conditions")
	}
	var nm string
	if json.Unmarshal(m["name"], &nm) != nil || nm == "" {
		return nil, bad(path+".name", "is required: one of %s", strings.Join(Names(), ", "))
	}
	var prop *string
	if !isNull(m["property"]) && json.Unmarshal(m["property"], &prop) != nil {
		return nil, bad(path+".property", "must be a string or null")
	}
	spec, key, err := lookupName(path, nm, prop)
	if err != nil {
		return nil, err
	}
	if spec.kind == kItems && inItem {
		// An items condition reads the whole order: nested in another,
		// its work would multiply with every level.
		return nil, bad(path+".name", "%s cannot be nested in the rules of another items condition", nm)
	}
	if spec.item && !inItem {
		return nil, bad(path+".name", "%s reads one order item: use it in the rules of an order.items.any, order.items.every or order.items.none condition", nm)
	}
	cd := &cond{path: strings.TrimPrefix(strings.ReplaceAll(path, ".rules.", "."), "rules."), spec: spec, prop: key,
		customer: strings.HasPrefix(nm, "customer.")}
	c.redemptions = c.redemptions || strings.HasPrefix(nm, "redemption.count.")
	if cd.message, err = message(path+".error", m["error"]); err != nil {
		return nil, err
	}
	// conditions: {} (as the reference's own example nests one) tests
	// nothing: the condition holds, its nested rules aside. Absent, it
	// is a mistake.
	if _, ok := m["conditions"]; !ok || isNull(m["conditions"]) {
		return nil, bad(path+".conditions", "is required: an object of %s, or {} for none", strings.Join(opsOf[spec.kind], ", "))
	}
	conds, err := decodeObject(path+".conditions", m["conditions"])
	if err != nil {
		return nil, err
	}
	cd.empty = len(conds) == 0
	opNames := make([]string, 0, len(conds))
	for op := range conds {
		opNames = append(opNames, op)
	}
	sort.Strings(opNames)
	for _, op := range opNames {
		if err := c.op(cd, path+".conditions."+op, nm, op, conds[op]); err != nil {
			return nil, err
		}
	}
	if sub := m["rules"]; !isNull(sub) {
		inner, err := decodeObject(path+".rules", sub)
		if err != nil {
			return nil, err
		}
		if len(inner) > 0 {
			if depth >= maxDepth {
				return nil, bad(path+".rules", "rules nest at most %d levels deep", maxDepth)
			}
			if cd.sub, err = c.group(path+".rules", sub, depth+1, inItem || spec.kind == kItems); err != nil {
				return nil, err
			}
			if len(cd.sub.conds) == 0 {
				cd.sub = nil // only a logic or junction: nothing to check
			}
		}
	}
	return cd, nil
}

// lookupName finds a rule name and its property: the reference's
// {"name": "order.metadata", "property": "color"} or order.metadata.color.
func lookupName(path, nm string, prop *string) (name, string, error) {
	if spec, ok := names[nm]; ok {
		if !spec.prop {
			if prop != nil && *prop != "" {
				return name{}, "", bad(path+".property", "%s takes no property", nm)
			}
			return spec, "", nil
		}
		if prop == nil || *prop == "" {
			return name{}, "", bad(path+".property", "is required for %s: the metadata key to read", nm)
		}
		if len(*prop) > maxText {
			return name{}, "", bad(path+".property", "is longer than %d characters", maxText)
		}
		return spec, *prop, nil
	}
	for base, spec := range names {
		if !spec.prop || !strings.HasPrefix(nm, base+".") {
			continue
		}
		key := strings.TrimPrefix(nm, base+".")
		switch {
		case key == "" && (prop == nil || *prop == ""):
			return name{}, "", bad(path+".property", "is required for %s: the metadata key to read", base)
		case key == "":
			key = *prop // "redemption.metadata." with a property, as a guide writes it
		case prop != nil && *prop != "" && *prop != key:
			return name{}, "", bad(path+".property", "is %q but the name %s reads %q; give the key once", *prop, nm, key)
		}
		if len(key) > maxText {
			return name{}, "", bad(path+".name", "is longer than %d characters", maxText)
		}
		return spec, key, nil
	}
	return name{}, "", bad(path+".name", "unknown rule name %q; the names served are %s (metadata names also as name.<key>)",
		nm, strings.Join(Names(), ", "))
}

// op compiles condition op of a condition named nm into cd.
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
	k := cd.spec.kind
	switch canon {
	case "$is_unknown", "$has_value":
		if !noValue(vals) {
			return bad(path, "takes no value: pass [] or true")
		}
		if canon == "$is_unknown" {
			cd.tests = append(cd.tests, func(v any) bool { return v == nil })
		} else {
			cd.tests = append(cd.tests, func(v any) bool { return v != nil })
		}
		return nil
	case "$more_than", "$more_than_equal", "$less_than", "$less_than_equal":
		if len(vals) != 1 {
			return bad(path, "takes one number, as [5000]")
		}
		n, err := number(path+"[0]", vals[0], k == kInt)
		if err != nil {
			return err
		}
		cmp := map[string]func(a float64) bool{
			"$more_than": func(a float64) bool { return a > n }, "$more_than_equal": func(a float64) bool { return a >= n },
			"$less_than": func(a float64) bool { return a < n }, "$less_than_equal": func(a float64) bool { return a <= n },
		}[canon]
		cd.tests = append(cd.tests, func(v any) bool { f, ok := v.(float64); return ok && cmp(f) })
		return nil
	case "$after", "$before":
		if len(vals) != 1 {
			return bad(path, "takes one date-time, as [\"2026-01-31T00:00:00Z\"]")
		}
		s, _ := vals[0].(string)
		t, ok := parseTime(s)
		if !ok {
			return bad(path+"[0]", "must be an RFC 3339 date-time or a YYYY-MM-DD date, got %s", show(vals[0]))
		}
		after := canon == "$after"
		cd.tests = append(cd.tests, func(v any) bool {
			at, ok := timeOf(v)
			return ok && (after && at.After(t) || !after && at.Before(t))
		})
		return nil
	case "$contains", "$not_contain", "$starts_with", "$ends_with":
		ss, err := stringsOf(path, vals)
		if err != nil {
			return err
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
			cd.tests = append(cd.tests, func(v any) bool { return !t(v) })
		} else {
			cd.tests = append(cd.tests, t)
		}
		return nil
	}
	// $is, $is_not, $in, $not_in: equal to one of the values, or to none.
	// An empty list ($in: [], which the reference's arrays allow) is
	// equal to nothing: $in holds for no value, $not_in for every one.
	if len(vals) == 0 && (canon == "$is" || canon == "$is_not") {
		return bad(path, "needs at least one value, as [\"x\"]")
	}
	negate := canon == "$is_not" || canon == "$not_in"
	if err := c.countValues(path, len(vals)); err != nil {
		return err
	}
	if k == kItems {
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
	want := make([]any, len(vals))
	for i, v := range vals {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch k {
		case kInt:
			n, err := number(p, v, true)
			if err != nil {
				return err
			}
			want[i] = n
		case kString, kSet:
			s, ok := v.(string)
			if !ok {
				return bad(p, "must be a string, got %s", show(v))
			}
			if err := checkString(p, s); err != nil {
				return err
			}
			want[i] = s
		default: // kAny
			switch x := v.(type) {
			case json.Number:
				n, err := number(p, x, false)
				if err != nil {
					return err
				}
				want[i] = n
			case string:
				if err := checkString(p, x); err != nil {
					return err
				}
				want[i] = x
			case bool:
				want[i] = x
			default:
				return bad(p, "must be a string, a number or a boolean, got %s", show(v))
			}
		}
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
		cd.tests = append(cd.tests, func(v any) bool { return !eq(v) })
	} else {
		cd.tests = append(cd.tests, eq)
	}
	return nil
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

// parseTime reads an RFC 3339 date-time or a YYYY-MM-DD date (midnight UTC).
func parseTime(s string) (time.Time, bool) {
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
		return parseTime(x)
	}
	return time.Time{}, false
}

// applicability is a compiled applicable_to.
type applicability struct {
	all      bool
	included []ref
	excluded []ref
}

// compileApplicable checks applicable_to: {included, excluded, included_all}.
func compileApplicable(raw json.RawMessage) (*applicability, error) {
	if isNull(raw) {
		return nil, nil
	}
	v, err := decodeValue(raw)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, bad("applicable_to", "must be an object with included, excluded and included_all")
	}
	a := &applicability{}
	switch x := m["included_all"].(type) {
	case nil:
	case bool:
		a.all = x
	default:
		return nil, bad("applicable_to.included_all", "must be a boolean")
	}
	for _, side := range []string{"included", "excluded"} {
		var list []any
		switch x := m[side].(type) {
		case nil:
		case []any:
			list = x
		default:
			return nil, bad("applicable_to."+side, "must be an array of products, SKUs or collections")
		}
		if len(list) > maxValues {
			return nil, bad("applicable_to."+side, "holds at most %d entries", maxValues)
		}
		for i, e := range list {
			p := fmt.Sprintf("applicable_to.%s[%d]", side, i)
			r, err := refOf(p, e)
			if err != nil {
				return nil, err
			}
			if em, _ := e.(map[string]any); em != nil && em["effect"] != nil {
				if s, _ := em["effect"].(string); !has(effects, s) {
					return nil, bad(p+".effect", "must be one of %s", strings.Join(effects, ", "))
				}
			}
			if side == "included" {
				a.included = append(a.included, r)
			} else {
				a.excluded = append(a.excluded, r)
			}
		}
	}
	if !a.all && len(a.included) == 0 && len(a.excluded) == 0 {
		return nil, nil // says nothing: every item
	}
	return a, nil
}

// effects are ApplicableToEffect's values.
var effects = []string{"APPLY_TO_EVERY", "APPLY_TO_CHEAPEST", "APPLY_FROM_CHEAPEST", "APPLY_TO_MOST_EXPENSIVE", "APPLY_FROM_MOST_EXPENSIVE"}
