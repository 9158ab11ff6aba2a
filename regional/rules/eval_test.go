package rules

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// evalRow is one evaluation: rules against baseInput, changed first; the
// verdict's validity and, when not valid, the condition blamed and the
// message given (ruleMsg is the rule's own error.message).
type evalRow struct {
	name    string
	rules   string
	ruleMsg string
	change  func(*Input)
	valid   bool
	cond    string
	msg     string
}

func runRows(t *testing.T, rows []evalRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var errDoc json.RawMessage
			if r.ruleMsg != "" {
				errDoc = json.RawMessage(`{"message":"` + r.ruleMsg + `"}`)
			}
			p, err := Compile(json.RawMessage(r.rules), errDoc, nil)
			if err != nil {
				t.Fatalf("compile %s: %v", r.rules, err)
			}
			in := baseInput()
			if r.change != nil {
				r.change(&in)
			}
			v := p.Run("val_1", &in)
			switch {
			case v.Valid != r.valid:
				t.Fatalf("valid = %v, want %v (%+v)", v.Valid, r.valid, v.Error)
			case r.valid && v.Error != nil:
				t.Fatalf("a valid verdict with an error: %+v", v.Error)
			case !r.valid && (v.Error == nil || v.Error.RuleID != "val_1" || v.Error.Condition != r.cond || v.Error.Message != r.msg):
				t.Fatalf("error = %+v, want condition %q message %q", v.Error, r.cond, r.msg)
			}
		})
	}
}

// Conditions on each kind of name: whole numbers, texts, metadata values
// of every type a decoder or a caller gives, sets, the time, lists.
func TestEvaluationOfEachKindOfName(t *testing.T) {
	orderMeta := func(k string, v any) func(*Input) { return func(in *Input) { in.Order.Metadata[k] = v } }
	runRows(t, []evalRow{
		// Whole numbers.
		{name: "int: items count in", rules: one("order.items.count", `{"$in":[1,2]}`), valid: true},
		{name: "int: the count being validated is counted", rules: one("redemption.count.per_day", `{"$is":[5]}`), valid: true},
		{name: "int: no customer still counts", rules: one("redemption.count.per_customer", `{"$is":[2]}`),
			change: func(in *Input) { in.Customer = nil }, valid: true},
		// Texts.
		{name: "string: contains", rules: one("customer.id", `{"$contains":["ust"]}`), valid: true},
		{name: "string: not contain", rules: one("customer.id", `{"$not_contain":["ust"]}`), cond: "1"},
		{name: "string: starts with one of", rules: one("customer.source_id", `{"$starts_with":["bob","alice"]}`), valid: true},
		{name: "string: an empty id is unknown", rules: one("customer.id", `{"$is_unknown":[]}`),
			change: func(in *Input) { in.Customer.ID = "" }, valid: true},
		{name: "string: an unknown id is not in a list", rules: one("customer.id", `{"$in":["cust_1"]}`),
			change: func(in *Input) { in.Customer.ID = "" }, cond: "1"},
		// Metadata values, normalised.
		{name: "any: an int32", rules: one("order.metadata.n", `{"$is":[7]}`), change: orderMeta("n", int32(7)), valid: true},
		{name: "any: a uint64", rules: one("order.metadata.n", `{"$more_than":[6]}`), change: orderMeta("n", uint64(7)), valid: true},
		{name: "any: a float32", rules: one("order.metadata.n", `{"$less_than":[7.6]}`), change: orderMeta("n", float32(7.5)), valid: true},
		{name: "any: a number that is not a float is its text", rules: one("order.metadata.n", `{"$is":["0x1p-2x"]}`),
			change: orderMeta("n", json.Number("0x1p-2x")), valid: true},
		{name: "any: a number in text is not the number", rules: one("order.metadata.n", `{"$is":[5]}`), change: orderMeta("n", "5"), cond: "1"},
		{name: "any: a []string contains", rules: one("order.metadata.n", `{"$contains":["b"]}`), change: orderMeta("n", []string{"a", "b"}), valid: true},
		{name: "any: a list equals when a member does", rules: one("order.metadata.tags", `{"$in":["summer"]}`), valid: true},
		{name: "any: a list does not start with", rules: one("order.metadata.tags", `{"$starts_with":["vip"]}`), cond: "1"},
		{name: "any: a time.Time compares as a date", rules: one("order.metadata.n", `{"$before":["2026-01-02"]}`),
			change: orderMeta("n", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), valid: true},
		{name: "any: a text that is no date is neither after nor before", rules: one("order.metadata.location", `{"$after":["2000-01-01"]}`), cond: "1"},
		{name: "any: an object has a value", rules: one("order.metadata.n", `{"$has_value":[]}`), change: orderMeta("n", map[string]any{"a": 1}), valid: true},
		{name: "any: an object equals nothing", rules: one("order.metadata.n", `{"$is":["a"]}`), change: orderMeta("n", map[string]any{"a": 1}), cond: "1"},
		{name: "any: an object is not each value", rules: one("order.metadata.n", `{"$is_not":["a"]}`), change: orderMeta("n", map[string]any{"a": 1}), valid: true},
		{name: "any: no metadata at all is unknown", rules: one("customer.metadata.tier", `{"$is_unknown":true}`),
			change: func(in *Input) { in.Customer.Metadata = nil }, valid: true},
		{name: "any: the event's metadata with no event", rules: one("custom_event.metadata.plan", `{"$is_unknown":[]}`),
			change: func(in *Input) { in.Event = nil }, valid: true},
		// Sets.
		{name: "set: in", rules: one("customer.segment", `{"$in":["seg_a","seg_vip"]}`), valid: true},
		{name: "set: is not", rules: one("customer.segment", `{"$is_not":["seg_vip"]}`), cond: "1"},
		{name: "set: no segments is unknown", rules: one("customer.segment", `{"$is_unknown":[]}`),
			change: func(in *Input) { in.Customer.Segments = nil }, valid: true},
		// The time.
		{name: "time: before, by a second", rules: one("date", `{"$before":["2026-06-15T12:00:01Z"]}`), valid: true},
		{name: "time: in another zone", rules: one("date", `{"$after":["2026-06-15T13:59:59+02:00"]}`), valid: true},
		{name: "time: zero is the wall clock", rules: one("date", `{"$after":["2020-01-01"]}`),
			change: func(in *Input) { in.Now = time.Time{} }, valid: true},
		// Lists: one or each item's price.
		{name: "price_any: the shirt", rules: one("order.items.price_any", `{"$more_than":[1999]}`), valid: true},
		{name: "price_each: all under", rules: one("order.items.price_each", `{"$less_than":[2001]}`), valid: true},
		{name: "price_each: the hat differs", rules: one("order.items.price_each", `{"$is":[2000]}`), cond: "1"},
		{name: "price_any: no order is unknown", rules: one("order.items.price_any", `{"$is_unknown":[]}`),
			change: func(in *Input) { in.Order = nil }, valid: true},
	})
}

// Nested groups: a condition's rules are read when it holds, and the
// deepest failing condition with a message on the way is blamed.
func TestEvaluationOfNestedGroups(t *testing.T) {
	deep := func(innerMsg, middleMsg string) string {
		return one("order.amount", `{}`, "", one("customer.id", `{}`, middleMsg, one("customer.segment", `{"$is":["seg_x"]}`, innerMsg)))
	}
	runRows(t, []evalRow{
		{name: "three levels: the deepest message", rules: deep("deep", ""), ruleMsg: "rule", cond: "1.1.1", msg: "deep"},
		{name: "three levels, no message: the top condition and the rule's message", rules: deep("", ""), ruleMsg: "rule", cond: "1", msg: "rule"},
		{name: "a message in the middle only: the middle", rules: deep("", "middle"), ruleMsg: "rule", cond: "1.1", msg: "middle"},
		{name: "messages in the middle and deepest: the deepest", rules: deep("deep", "middle"), cond: "1.1.1", msg: "deep"},
		{name: "three levels, held", rules: deep("deep", ""), change: func(in *Input) { in.Customer.Segments = []string{"seg_x"} }, valid: true},
		{name: "the outer condition fails first: it is blamed", rules: one("order.amount", `{"$more_than":[9999]}`, "",
			one("customer.id", `{"$is":["x"]}`, "inner")), ruleMsg: "rule", cond: "1", msg: "rule"},
		{name: "a nested or", rules: one("order.amount", `{}`, "", `{"1":`+c("customer.id", `{"$is":["x"]}`)+`,"2":`+c("customer.id", `{"$is":["cust_1"]}`)+
			`,"logic":"1 or 2"}`), valid: true},
		{name: "a nested junction of or, none held: the first key", rules: one("order.amount", `{}`, "", `{"2":`+c("customer.id", `{"$is":["x"]}`, "two")+
			`,"1":`+c("customer.id", `{"$is":["y"]}`, "one")+`,"junction":"or"}`), cond: "1.1", msg: "one"},
		{name: "the nested rules of a failing sibling are not read", rules: `{"1":` + c("order.amount", `{"$less_than":[1]}`, "",
			one("customer.id", `{"$is":["x"]}`, "inner")) + `,"2":` + c("order.amount", `{}`) + `,"logic":"1 or 2"}`, valid: true},
	})
}

// Logic: and binds tighter than or, parentheses group, case does not
// matter, and the first failing operand is blamed.
func TestEvaluationOfLogic(t *testing.T) {
	yes := c("order.amount", `{}`)
	no := func(msg string) string { return c("customer.id", `{"$is":["x"]}`, msg) }
	three := func(a, b, d, logic string) string {
		return `{"1":` + a + `,"2":` + b + `,"3":` + d + `,"logic":"` + logic + `"}`
	}
	runRows(t, []evalRow{
		{name: "or, both fail: the first operand", rules: three(no("one"), no("two"), yes, "1 or 2"), cond: "1", msg: "one"},
		{name: "or written the other way: its first operand", rules: three(no("one"), no("two"), yes, "2 or 1"), cond: "2", msg: "two"},
		{name: "(1 and 2) or 3, all fail: 1", rules: three(no("one"), no("two"), no("three"), "(1 and 2) or 3"), cond: "1", msg: "one"},
		{name: "1 or 2 and 3: 1 holds", rules: three(yes, no("two"), no("three"), "1 or 2 and 3"), valid: true},
		{name: "1 or 2 and 3: 1 fails, 3 fails: the first operand, 1", rules: three(no("one"), yes, no("three"), "1 or 2 and 3"), cond: "1", msg: "one"},
		{name: "1 and (2 or 3): 1 fails", rules: three(no("one"), yes, yes, "1 AND (2 OR 3)"), cond: "1", msg: "one"},
		{name: "and in mixed case, the second fails", rules: three(yes, no("two"), yes, "1 AnD 2 aNd 3"), cond: "2", msg: "two"},
		{name: "deep parentheses", rules: three(no("one"), yes, no("three"), "((1 or (2))) and (3 or 2)"), valid: true},
		{name: "a condition the logic does not name is not read", rules: three(yes, no("two"), no("three"), "1"), valid: true},
		{name: "without logic every condition, by number", rules: three(yes, no("two"), no("three"), ""), cond: "2", msg: "two"},
		{name: "without logic, with no message: the rule's", rules: three(yes, yes, no(""), ""), ruleMsg: "rule", cond: "3", msg: "rule"},
	})
}

// Item quantifiers: any listed product, SKU or collection met, every one,
// none; a line is met when it meets the nested rules, which read the line
// and the lines of the same listed object.
func TestEvaluationOfItemQuantifiers(t *testing.T) {
	shirt := `{"object":"product","id":"prod_shirt"}`
	hat := `{"object":"product","id":"prod_hat"}`
	shoes := `{"object":"product","id":"prod_shoes"}`
	moreShirts := func(in *Input) {
		in.Order.Items = append(in.Order.Items, Item{ProductID: "prod_shirt", Quantity: 3, Price: 2000})
	}
	runRows(t, []evalRow{
		{name: "any: the second listed is there", rules: one("order.items.any", `{"$in":[`+shoes+`,`+hat+`]}`), valid: true},
		{name: "any: none there and no lines to blame", rules: one("order.items.any", `{"$in":[`+shoes+`]}`, "", one("order.items.quantity", `{}`, "inner")),
			ruleMsg: "rule", cond: "1", msg: "rule"},
		{name: "any: the first listed object with lines is blamed", rules: one("order.items.any", `{"$in":[`+shoes+`,`+hat+`]}`, "",
			one("order.items.quantity", `{"$more_than":[5]}`, "More of it")), cond: "1.1", msg: "More of it"},
		{name: "any: no order", rules: one("order.items.any", `{"$is":[`+hat+`]}`), change: func(in *Input) { in.Order = nil }, cond: "1"},
		{name: "every: both there", rules: one("order.items.every", `{"$is":[`+shirt+`,`+hat+`]}`), valid: true},
		{name: "every: one there fails the nested rules", rules: one("order.items.every", `{"$is":[`+shirt+`,`+hat+`]}`, "",
			one("order.items.price", `{"$more_than":[1600]}`, "Above 16.00")), cond: "1.1", msg: "Above 16.00"},
		{name: "every: no order", rules: one("order.items.every", `{"$is":[`+hat+`]}`), change: func(in *Input) { in.Order = nil }, cond: "1"},
		{name: "every: a product named twice", rules: one("order.items.every", `{"$is":[`+hat+`,`+hat+`]}`), valid: true},
		{name: "none: there but failing the nested rules holds", rules: one("order.items.none", `{"$is":[`+shirt+`]}`, "",
			one("order.items.quantity", `{"$more_than_equal":[5]}`)), valid: true},
		{name: "none: there and meeting them fails", rules: one("order.items.none", `{"$is":[`+shirt+`]}`, "",
			one("order.items.quantity", `{"$more_than_equal":[2]}`, "inner")), ruleMsg: "rule", cond: "1", msg: "rule"},
		{name: "none: no order", rules: one("order.items.none", `{"$is":[`+hat+`]}`), change: func(in *Input) { in.Order = nil }, valid: true},
		{name: "the lines of one product add up", rules: one("order.items.any", `{"$is":[`+shirt+`]}`, "",
			`{"1":`+c("order.items.aggregated_quantity", `{"$is":[5]}`)+`,"2":`+c("order.items.aggregated_amount", `{"$is":[10000]}`)+`}`),
			change: moreShirts, valid: true},
		{name: "a line's quantity is its own", rules: one("order.items.any", `{"$is":[`+shirt+`]}`, "", one("order.items.quantity", `{"$is":[5]}`)),
			change: moreShirts, cond: "1"},
		{name: "a collection gathers its products' lines", rules: one("order.items.any", `{"$is":[{"object":"products_collection","id":"pc_summer"}]}`, "",
			one("order.items.aggregated_quantity", `{"$is":[3]}`)),
			change: func(in *Input) { in.Order.Items[1].CollectionIDs = []string{"pc_summer"} }, valid: true},
		{name: "a SKU by source id", rules: one("order.items.any", `{"$is":[{"object":"sku","source_id":"shirt-m"}]}`), valid: true},
		{name: "a product object does not match a SKU's id", rules: one("order.items.any", `{"$is":[{"object":"product","id":"sku_shirt_m"}]}`), cond: "1"},
		{name: "an item's metadata number", rules: one("order.items.any", `{"$is":[`+shirt+`]}`, "", one("order.items.metadata.size", `{"$more_than":[40]}`)), valid: true},
		{name: "each price inside reads the one line", rules: one("order.items.any", `{"$is":[`+hat+`]}`, "", one("order.items.price_each", `{"$is":[1500]}`)), valid: true},
	})
}

// NamesItemOf of an order without lines is false, whatever the rules.
func TestNamesItemOfNoLines(t *testing.T) {
	p, err := Compile(json.RawMessage(one("order.items.any", `{"$is":[{"object":"product","id":"prod_hat"}]}`)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]*Order{"no order": nil, "no lines": {}} {
		t.Run(name, func(t *testing.T) {
			if p.NamesItemOf(o) {
				t.Fatal("names an item of no lines")
			}
		})
	}
}

// A program names the collections of its items conditions, at any depth,
// and of its applicable_to, each once: those whose lines its caller marks.
func TestProgramNamesItsCollections(t *testing.T) {
	rules := one("order.amount", `{"$more_than":[0]}`, "", one("order.items.any",
		`{"$in":[{"object":"products_collection","id":"pc_a"},{"object":"product","id":"prod_1"},{"object":"products_collection","id":"pc_b"}]}`))
	p, err := Compile(json.RawMessage(rules), nil,
		json.RawMessage(`{"included":[{"object":"products_collection","id":"pc_b"}],"excluded":[{"object":"products_collection","id":"pc_c"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.Collections()); got != "[pc_a pc_b pc_c]" {
		t.Errorf("Collections() = %s, want [pc_a pc_b pc_c]", got)
	}
	if p, _ := Compile(json.RawMessage(one("order.amount", `{"$more_than":[0]}`)), nil, nil); len(p.Collections()) != 0 {
		t.Errorf("a rule naming no collection names %v", p.Collections())
	}
}
