package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
)

// Rules that do not compile are a 400 naming where and what.
func TestRulesRefusedOnWrite(t *testing.T) {
	for _, r := range []struct{ rules, errDoc, applicable, want string }{
		{rules: one("order.foo", `{"$is":[1]}`), want: `rules.1.name: unknown rule name "order.foo"`},
		{rules: one("order.amount", `{"$bigger":[1]}`), want: `rules.1.conditions.$bigger: unknown condition $bigger`},
		{rules: one("customer.id", `{"$more_than":[1]}`), want: `rules.1.conditions.$more_than: customer.id does not take $more_than`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"logic":"1 and 4"}`, want: `rules.logic: names condition 4`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"2":` + c("order.amount", `{"$is":[1]}`) + `,"logic":"1 and (2"}`, want: `rules.logic: the ( at character 7 is not closed`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"2":` + c("order.amount", `{"$is":[1]}`) + `,"logic":"1 2"}`, want: `rules.logic: unexpected "2"`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"2":` + c("order.amount", `{"$is":[1]}`) + `,"logic":"1 & 2"}`, want: `rules.logic: unexpected '&'`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"logic":"1 or"}`, want: `rules.logic: ends where a condition key`},
		{rules: `{"1":` + c("order.amount", `{"$is":[1]}`) + `,"logic":7}`, want: `rules.logic: must be a string`},
		{rules: one("order.amount", `{"$more_than":["a"]}`), want: `rules.1.conditions.$more_than[0]: must be a whole number`},
		{rules: one("order.amount", `{"$is":[10.5]}`), want: `rules.1.conditions.$is[0]: must be a whole number`},
		{rules: one("order.amount", `{"$more_than":[1, 2]}`), want: `rules.1.conditions.$more_than: takes one number`},
		{rules: one("order.amount", `{"$is":[]}`), want: `rules.1.conditions.$is: needs at least one value`},
		{rules: one("customer.id", `{"$is":[7]}`), want: `rules.1.conditions.$is[0]: must be a string, got 7`},
		{rules: one("order.items.any", `{"$is":["prod_1"]}`), want: `rules.1.conditions.$is[0]: must be an object naming a product`},
		{rules: one("order.items.any", `{"$is":[{"object":"category","id":"x"}]}`), want: `rules.1.conditions.$is[0].object: must be product, sku or products_collection`},
		{rules: one("order.metadata", `{"$is":["x"]}`), want: `rules.1.property: is required for order.metadata`},
		{rules: `{"1":{"name":"order.amount","property":"x","conditions":{"$is":[1]}}}`, want: `rules.1.property: order.amount takes no property`},
		{rules: one("order.items.price", `{"$is":[1]}`), want: `rules.1.name: order.items.price reads one order item`},
		{rules: one("order.items.any", `{"$is":[{"id":"p"}]}`, "", `{"1":`+c("order.items.nope", `{"$is":[1]}`)+`}`), want: `rules.1.rules.1.name: unknown rule name "order.items.nope"`},
		{rules: one("date", `{"$after":["yesterday"]}`), want: `rules.1.conditions.$after[0]: must be an RFC 3339 date-time`},
		{rules: one("order.amount", `{"$has_value":[5]}`), want: `rules.1.conditions.$has_value: takes no value`},
		{rules: `{"1":{"name":"order.amount"}}`, want: `rules.1.conditions: is required: an object of`},
		{rules: one("order.amount", `null`), want: `rules.1.conditions: is required`},
		{rules: one("order.amount", `[]`), want: `rules.1.conditions: must be an object`},
		{rules: one("order.amount", `{"$is_not":[]}`), want: `rules.1.conditions.$is_not: needs at least one value`},
		{rules: one("order.amount", `{"$in":[1.5]}`), want: `rules.1.conditions.$in[0]: must be a whole number`},
		{rules: `{"1":{"conditions":{"$is":[1]}}}`, want: `rules.1.name: is required`},
		{rules: `{"and":` + c("order.amount", `{"$is":[1]}`) + `}`, want: `cannot be a condition's key`},
		{rules: `{"1":"order.amount"}`, want: `rules.1: must be a condition`},
		{rules: `[1]`, want: `rules: must be an object`},
		{rules: one("order.amount", `{"$is":[1]}`, "", `{"1":`+c("order.amount", `{"$is":[1]}`)+`,"junction":"xor"}`), want: `rules.1.rules.junction: must be and or or`},
		{rules: one("order.amount", `{"$is":[1]}`), errDoc: `{"message":5}`, want: `error.message: must be a string`},
		{rules: `{}`, applicable: `{"included":[{"object":"product","id":"p","effect":"APPLY_TO_SOME"}]}`, want: `applicable_to.included[0].effect: must be one of`},
		{rules: `{}`, applicable: `{"excluded":[{"object":"sku"}]}`, want: `applicable_to.excluded[0]: must give an id or a source_id`},
		{rules: one("order.amount", `{"$is":[99999999999999999999]}`), want: `rules.1.conditions.$is[0]: must be a number from`},
		// Limits that bound an evaluation's work and a compiled rule's memory.
		{rules: one("order.items.any", `{"$is":[{"id":"p"}]}`, "", `{"1":`+c("order.items.any", `{"$is":[{"id":"q"}]}`)+`}`),
			want: `rules.1.rules.1.name: order.items.any cannot be nested in the rules of another items condition`},
		{rules: one("customer.id", `{"$in":[`+strings.Repeat(`"aaaaaaaaaaaaaaaaaaaa",`, 3500)+`"z"]}`), want: `a rule's documents hold at most 64 KB`},
		{rules: manyValues(6), want: `a rule holds at most 5000 values in all its conditions`},
	} {
		t.Run(r.want, func(t *testing.T) {
			_, err := Compile(json.RawMessage(r.rules), opt(r.errDoc), opt(r.applicable))
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Key != "invalid_payload" || !strings.Contains(ae.Details, r.want) {
				t.Errorf("%s: got %v, want a 400 saying %q", r.rules, err, r.want)
			}
		})
	}
}

// manyValues is a rule of n conditions of 1,000 short values each.
func manyValues(n int) string {
	var parts []string
	for i := range n {
		vals := make([]string, 1000)
		for j := range vals {
			vals[j] = fmt.Sprint(j)
		}
		parts = append(parts, fmt.Sprintf(`"%d":{"name":"customer.id","conditions":{"$in":["%s"]}}`, i+1, strings.Join(vals, `","`)))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// opt is s as a document, nil when empty.
func opt(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// Nested rules past maxDepth are refused.
func TestRulesNestAtMostMaxDepth(t *testing.T) {
	rules := one("order.amount", `{"$is":[1]}`)
	for range maxDepth {
		rules = one("order.amount", `{"$is":[1]}`, "", rules)
	}
	if _, err := Compile(json.RawMessage(rules), nil, nil); err == nil || !strings.Contains(err.Error(), "nest at most") {
		t.Fatalf("got %v", err)
	}
}

// A sample value for each condition, by the kind of name it is on: what
// the grammar takes, so that every name × condition it lists compiles.
var samples = map[kind]map[string]string{
	kInt: {"$is": `[1]`, "$is_not": `[1]`, "$in": `[1, 2]`, "$not_in": `[]`, "$more_than": `[1]`, "$more_than_equal": `[1]`,
		"$less_than": `[1]`, "$less_than_equal": `[-1]`, "$is_unknown": `[]`, "$has_value": `true`},
	kString: {"$is": `["a"]`, "$is_not": `"a"`, "$in": `["a", "b"]`, "$not_in": `[]`, "$contains": `["a"]`, "$not_contain": `["a"]`,
		"$starts_with": `["a"]`, "$ends_with": `["a", "b"]`, "$is_unknown": `null`, "$has_value": `""`},
	kAny: {"$is": `["a", 1.5, true]`, "$is_not": `[false]`, "$in": `[1]`, "$not_in": `["a"]`, "$more_than": `[1.5]`,
		"$more_than_equal": `[-2]`, "$less_than": `[0]`, "$less_than_equal": `[3]`, "$contains": `["a"]`, "$not_contain": `["a"]`,
		"$starts_with": `["a"]`, "$ends_with": `["a"]`, "$is_unknown": `[]`, "$has_value": `[]`, "$after": `["2026-01-01"]`,
		"$before": `["2026-01-01T10:00:00+02:00"]`, "$in_location": `["loc_1", "loc_2"]`},
	kSet:   {"$is": `["seg"]`, "$is_not": `["seg"]`, "$in": `["seg"]`, "$not_in": `["seg"]`, "$is_unknown": `[]`, "$has_value": `[]`},
	kItems: {"$is": `[{"object":"product","id":"prod_1"}]`, "$in": `[{"source_id":"shirt"},{"object":"products_collection","id":"pc_1"}]`},
	kTime:  {"$after": `["2026-01-01"]`, "$before": `["2026-01-01T00:00:00Z"]`},
}

// Every name the language serves takes every condition its kind lists,
// where a rule may put it: names of one item inside an items condition.
func TestGrammarEveryNameTakesItsConditions(t *testing.T) {
	for _, nm := range Names() {
		spec := names[nm]
		for _, op := range opsOf[spec.kind] {
			t.Run(nm+" "+op, func(t *testing.T) {
				full := nm
				if spec.prop {
					full += ".color"
				}
				rules := one(full, `{"`+op+`":`+samples[spec.kind][op]+`}`)
				if spec.item {
					rules = one("order.items.any", `{"$is":[{"id":"prod_1"}]}`, "", rules)
				}
				if _, err := Compile(json.RawMessage(rules), nil, nil); err != nil {
					t.Fatalf("%s: %v", rules, err)
				}
			})
		}
	}
}

// What the grammar accepts beside the conditions themselves: its
// documents absent or null, the reference's spellings, keys, logic as
// people write it, nesting to the limit.
func TestGrammarCompiles(t *testing.T) {
	nested := one("order.amount", `{}`)
	for range maxDepth - 1 {
		nested = one("order.amount", `{}`, "", nested)
	}
	thousand := make([]string, maxValues)
	for i := range thousand {
		thousand[i] = fmt.Sprint(i)
	}
	for _, r := range []struct{ name, rules, errDoc, applicable string }{
		{name: "no documents"},
		{name: "null documents", rules: `null`, errDoc: `null`, applicable: `null`},
		{name: "an error without a message", rules: `{}`, errDoc: `{"message":null}`},
		{name: "aliases", rules: one("order.amount", `{"$more_than_or_equal":[1],"$greater_than_or_equal":[1],"$less_than_or_equal":[9]}`)},
		{name: "metadata by property", rules: `{"1":{"name":"customer.metadata","property":"tier","conditions":{"$is":["gold"]}}}`},
		{name: "metadata by name.key with the same property", rules: `{"1":{"name":"order.metadata.color","property":"color","conditions":{}}}`},
		{name: "metadata name ending in a dot, with a property", rules: `{"1":{"name":"redemption.metadata.","property":"channel","conditions":{}}}`},
		{name: "a null property on a name without one", rules: `{"1":{"name":"order.amount","property":null,"conditions":{}}}`},
		{name: "null error, rules, logic and junction", rules: `{"1":{"name":"order.amount","conditions":{},"error":null,"rules":null},"logic":null,"junction":null}`},
		{name: "nested rules of only a logic", rules: one("order.amount", `{}`, "", `{"logic":""}`)},
		{name: "keys of letters, digits, _ and $", rules: `{"$a_1":` + c("order.amount", `{}`) + `,"Z9":` + c("order.amount", `{}`) + `,"logic":"$a_1 or Z9"}`},
		{name: "a 64-character key", rules: `{"` + strings.Repeat("k", maxKey) + `":` + c("order.amount", `{}`) + `}`},
		{name: "logic in any case, over lines and tabs", rules: `{"1":` + c("order.amount", `{}`) + `,"2":` + c("order.amount", `{}`) +
			`,"3":` + c("order.amount", `{}`) + `,"logic":"1\tAND\n(2 Or 3)"}`},
		{name: "logic naming a key twice", rules: `{"1":` + c("order.amount", `{}`) + `,"logic":"1 and 1"}`},
		{name: "a blank logic", rules: `{"1":` + c("order.amount", `{}`) + `,"logic":"   "}`},
		{name: "junctions in any case", rules: `{"1":` + c("order.amount", `{}`) + `,"junction":" And "}`},
		{name: "nesting to the limit", rules: nested},
		{name: "a condition's limit of values", rules: one("customer.id", `{"$in":["`+strings.Join(thousand, `","`)+`"]}`)},
		{name: "an items condition naming a product twice", rules: one("order.items.every", `{"$is":[{"id":"p"},{"id":"p"}]}`)},
		{name: "applicable_to of exclusions only", rules: `{}`, applicable: `{"excluded":[{"object":"sku","source_id":"s"}]}`},
		{name: "applicable_to of every effect", rules: `{}`, applicable: `{"included":[` + func() string {
			var es []string
			for _, e := range effects {
				es = append(es, `{"id":"p","effect":"`+e+`"}`)
			}
			return strings.Join(es, ",")
		}() + `]}`},
	} {
		t.Run(r.name, func(t *testing.T) {
			if _, err := Compile(opt(r.rules), opt(r.errDoc), opt(r.applicable)); err != nil {
				t.Fatalf("%s: %v", r.rules, err)
			}
		})
	}
}

// What the grammar refuses, with the path of the property at fault first
// in the 400's details and what is wrong after it.
func TestGrammarRefusesNamingThePath(t *testing.T) {
	two := func(logic string) string {
		return `{"1":` + c("order.amount", `{}`) + `,"2":` + c("order.amount", `{}`) + `,"logic":` + logic + `}`
	}
	for _, r := range []struct{ name, rules, errDoc, applicable, path, says string }{
		// Keys, names and properties.
		{name: "an empty key", rules: `{"":` + c("order.amount", `{}`) + `}`, path: "rules", says: `a condition's key must be 1 to 64`},
		{name: "a key past 64 characters", rules: `{"` + strings.Repeat("k", maxKey+1) + `":` + c("order.amount", `{}`) + `}`,
			path: "rules", says: `a condition's key must be 1 to 64`},
		{name: "a key with a dash", rules: `{"a-b":` + c("order.amount", `{}`) + `}`, path: "rules", says: `got "a-b"`},
		{name: "an operator as a key", rules: `{"OR":` + c("order.amount", `{}`) + `}`, path: "rules", says: `"OR" cannot be a condition's key`},
		{name: "a name that is not a string", rules: `{"1":{"name":5,"conditions":{}}}`, path: "rules.1.name", says: "is required: one of custom_event.metadata, customer.id"},
		{name: "a property that is not a string", rules: `{"1":{"name":"order.metadata","property":5,"conditions":{}}}`,
			path: "rules.1.property", says: "must be a string or null"},
		{name: "a property beside a different name.key", rules: `{"1":{"name":"order.metadata.color","property":"size","conditions":{}}}`,
			path: "rules.1.property", says: `is "size" but the name order.metadata.color reads "color"; give the key once`},
		{name: "a name ending in a dot without a property", rules: one("order.metadata.", `{}`), path: "rules.1.property", says: "is required for order.metadata"},
		{name: "a property past the limit", rules: `{"1":{"name":"order.metadata","property":"` + strings.Repeat("p", maxText+1) + `","conditions":{}}}`,
			path: "rules.1.property", says: "is longer than 1000 characters"},
		{name: "an item's name outside an items condition", rules: one("order.items.metadata.color", `{}`),
			path: "rules.1.name", says: "order.items.metadata.color reads one order item"},
		// Conditions and their values.
		{name: "a date condition on an amount", rules: one("order.amount", `{"$after":["2026-01-01"]}`),
			path: "rules.1.conditions.$after", says: "order.amount does not take $after"},
		{name: "$is on the date", rules: one("date", `{"$is":["2026-01-01"]}`), path: "rules.1.conditions.$is", says: "date does not take $is; it takes $after, $before"},
		{name: "$contains on segments", rules: one("customer.segment", `{"$contains":["vip"]}`), path: "rules.1.conditions.$contains", says: "customer.segment does not take $contains"},
		{name: "$is_not on items", rules: one("order.items.any", `{"$is_not":[{"id":"p"}]}`), path: "rules.1.conditions.$is_not", says: "it takes $is, $in"},
		{name: "$contains without a string", rules: one("customer.id", `{"$contains":[]}`), path: "rules.1.conditions.$contains", says: "needs at least one string"},
		{name: "$contains of a number", rules: one("customer.id", `{"$contains":[5]}`), path: "rules.1.conditions.$contains[0]", says: "must be a string, got 5"},
		{name: "$after of two dates", rules: one("date", `{"$after":["2026-01-01","2026-02-01"]}`), path: "rules.1.conditions.$after", says: "takes one date-time"},
		{name: "metadata equal to an object", rules: one("order.metadata.x", `{"$is":[{}]}`), path: "rules.1.conditions.$is[0]",
			says: "must be a string, a number or a boolean, got an object"},
		{name: "a number past float64", rules: one("order.metadata.x", `{"$more_than":[1e400]}`), path: "rules.1.conditions.$more_than[0]",
			says: "must be a number from -9007199254740991 to 9007199254740991, got 1e400"},
		{name: "$has_value of a text", rules: one("order.amount", `{"$has_value":["x"]}`), path: "rules.1.conditions.$has_value", says: "takes no value"},
		{name: "a value past 1000 characters", rules: one("customer.id", `{"$is":["`+strings.Repeat("v", maxText+1)+`"]}`),
			path: "rules.1.conditions.$is[0]", says: "is longer than 1000 characters"},
		{name: "a condition past 1000 values", rules: one("order.amount", `{"$in":[`+strings.Repeat(`1,`, maxValues)+`1]}`),
			path: "rules.1.conditions.$in", says: "holds at most 1000 values"},
		{name: "conditions not an object", rules: one("order.amount", `"x"`), path: "rules.1.conditions", says: "must be an object"},
		{name: "nested rules not an object", rules: `{"1":{"name":"order.amount","conditions":{},"rules":[1]}}`, path: "rules.1.rules", says: "must be an object"},
		{name: "the rule's message not a string", rules: one("order.amount", `{}`), errDoc: `{"message":true}`, path: "error.message", says: "must be a string"},
		{name: "a nested condition's message not a string", rules: `{"1":{"name":"order.amount","conditions":{},"error":{"message":1}}}`,
			path: "rules.1.error.message", says: "must be a string"},
		{name: "an error that is not an object", rules: `{}`, errDoc: `"x"`, path: "error", says: "must be an object with a message, or null"},
		{name: "a message past 1000 characters", rules: `{}`, errDoc: `{"message":"` + strings.Repeat("m", maxText+1) + `"}`,
			path: "error.message", says: "is longer than 1000 characters"},
		// Logic and junctions.
		{name: "and twice", rules: two(`"1 and and 2"`), path: "rules.logic", says: `unexpected "and" at character 7 where a condition key was expected`},
		{name: "a closing parenthesis too many", rules: two(`"1)"`), path: "rules.logic", says: `unexpected ")" at character 2; join conditions with and or or`},
		{name: "empty parentheses", rules: two(`"()"`), path: "rules.logic", says: `unexpected ")" at character 2 where a condition key was expected`},
		{name: "logic past 1000 characters", rules: two(`"` + strings.Repeat("1 or ", 200) + `1"`), path: "rules.logic", says: "is longer than 1000 characters"},
		{name: "a nested logic naming an outer key", rules: one("order.amount", `{}`, "", `{"1":`+c("order.amount", `{}`)+`,"logic":"1 and 2"}`),
			path: "rules.1.rules.logic", says: "names condition 2 (character 7), which the rules do not define"},
		{name: "a junction that is not a string", rules: `{"junction":5}`, path: "rules.junction", says: "must be a string"},
		// applicable_to.
		{name: "applicable_to not an object", rules: `{}`, applicable: `[1]`, path: "applicable_to", says: "must be an object with included, excluded and included_all"},
		{name: "included_all not a boolean", rules: `{}`, applicable: `{"included_all":"yes"}`, path: "applicable_to.included_all", says: "must be a boolean"},
		{name: "included not an array", rules: `{}`, applicable: `{"included":{}}`, path: "applicable_to.included", says: "must be an array of products"},
		{name: "a collection without an id", rules: `{}`, applicable: `{"included":[{"object":"products_collection","source_id":"c"}]}`,
			path: "applicable_to.included[0].id", says: "is required for a products_collection"},
		{name: "an id that is not a string", rules: `{}`, applicable: `{"excluded":[{"object":"product","id":5}]}`,
			path: "applicable_to.excluded[0].id", says: "must be a string or null"},
	} {
		t.Run(r.name, func(t *testing.T) {
			_, err := Compile(opt(r.rules), opt(r.errDoc), opt(r.applicable))
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Key != "invalid_payload" {
				t.Fatalf("%s: got %v, want a 400", r.rules, err)
			}
			if !strings.HasPrefix(ae.Details, r.path+": ") || !strings.Contains(ae.Details, r.says) {
				t.Fatalf("details %q, want %q first and saying %q", ae.Details, r.path+": ", r.says)
			}
		})
	}
}

// A rule holds at most maxConditions conditions, counted over every level.
func TestGrammarCountsConditionsOverEveryLevel(t *testing.T) {
	inner := make([]string, maxConditions/2)
	for i := range inner {
		inner[i] = fmt.Sprintf(`"%d":%s`, i+1, c("order.amount", `{}`))
	}
	level := "{" + strings.Join(inner, ",") + "}"
	for _, r := range []struct {
		name  string
		rules string
		ok    bool
	}{
		{"two levels of 150 and the two holding them", `{"1":` + c("order.amount", `{}`, "", level) + `,"2":` + c("order.amount", `{}`, "", level) + `}`, false},
		{"one level of 150 and its holder", one("order.amount", `{}`, "", level), true},
	} {
		t.Run(r.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(r.rules), nil, nil)
			if r.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "a rule holds at most 300 conditions") {
				t.Fatalf("got %v, want ok %v", err, r.ok)
			}
		})
	}
}
