package rules

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tallyhq/tally/internal/apierr"
)

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

// Program is a compiled rule: what Run evaluates, with no document left
// to parse.
type Program struct {
	root       *group
	counts     bool   // it reads redemption counts (redemption.count.*)
	segments   bool   // it reads the customer's segments (customer.segment)
	message    string // the rule's error.message
	applicable *applicability
	locations  []string // the locations $in_location conditions name, each once
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
	refs    []ref    // order.items.any/every/none: the products, SKUs, collections
	locs    []string // $in_location: the locations the value must lie in one of
	empty   bool     // conditions: {}: the condition holds
	sub     *group   // nested rules, nil without
	message string
	// customer: the condition reads the customer (customer.*), which
	// qualifications' scopes tell apart from everything else.
	customer bool
	// What its tests ask, for an Index: the values of each $is or $in
	// (one must be equal), and the bounds of the comparisons (the value
	// must be at least each lo and at most each hi; dates in micros).
	eqs    [][]any
	lo, hi []float64
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
	redemptions   bool     // a condition reads redemption counts
	locations     []string // the locations $in_location conditions name
	segments      bool     // a condition reads the customer's segments
}

// bad is the 400 naming where a rule is wrong.
func bad(path, format string, args ...any) error {
	return apierr.InvalidPayload(path + ": " + fmt.Sprintf(format, args...))
}

// Compile checks a rule's documents and compiles them. rules is the rules
// object, errDoc the rule's error object, applicableTo its applicable_to;
// any may be empty. A rule that does not compile is apierr's 400 naming
// where it is wrong ("rules.3.conditions.$in[2]: …").
func Compile(rules, errDoc, applicableTo json.RawMessage) (*Program, error) {
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
	p := &Program{root: root, counts: c.redemptions, locations: uniq(c.locations), segments: c.segments}
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
	c.segments = c.segments || nm == "customer.segment"
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

// uniq is ss without repeats, in first-seen order.
func uniq(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
