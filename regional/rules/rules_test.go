package rules

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
)

// The input every row starts from: an order of two shirts (2,000 each) and
// a hat (1,500), 5,500 in all; a customer in one segment; counts so far.
func baseInput() Input {
	return Input{
		Order: &Order{ID: "ord_1", Items: []Item{
			{ProductID: "prod_shirt", ProductSourceID: "shirt", SKUID: "sku_shirt_m", SKUSourceID: "shirt-m",
				CollectionIDs: []string{"pc_summer"}, Quantity: 2, Price: 2000, Metadata: map[string]any{"color": "blue", "size": 42}},
			{ProductID: "prod_hat", ProductSourceID: "hat", Quantity: 1, Price: 1500, Metadata: map[string]any{"color": "red"}},
		}, Metadata: map[string]any{"location": "Santorini", "channel": "web", "tags": []any{"vip", "summer"},
			"pickup": "2026-06-01T10:00:00Z", "gift": true, "floor": json.Number("3")}},
		Customer: &Customer{ID: "cust_1", SourceID: "alice@example.com",
			Metadata: map[string]any{"tier": "gold", "visits": 12}, Segments: []string{"seg_vip"}},
		Redemptions: RedemptionCounts{PerCustomer: 1, PerCampaign: 99, PerDay: 4},
		Now:         time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC),
		Event:       &Event{Type: "signup", Metadata: map[string]any{"plan": "pro"}},
		Metadata:    map[string]any{"channel": "pos"},
	}
}

// c writes one condition: name, conditions, and optionally its error
// message and nested rules.
func c(name, conds string, extra ...string) string {
	s := `{"name":"` + name + `","conditions":` + conds
	if len(extra) > 0 && extra[0] != "" {
		s += `,"error":{"message":"` + extra[0] + `"}`
	}
	if len(extra) > 1 {
		s += `,"rules":` + extra[1]
	}
	return s + "}"
}

// one is a rules object of one condition.
func one(name, conds string, extra ...string) string {
	return `{"1":` + c(name, conds, extra...) + `,"logic":"1"}`
}

func TestRulesAgainstOrdersAndCustomers(t *testing.T) {
	noCustomer := func(in *Input) { in.Customer = nil }
	rows := []evalRow{
		// Order volume.
		{name: "amount more than, met", rules: one("order.amount", `{"$more_than":[5000]}`), valid: true},
		{name: "amount more than, missed: the rule's message", rules: one("order.amount", `{"$more_than":[5500]}`),
			ruleMsg: "Spend more than 55.00", msg: "Spend more than 55.00", cond: "1"},
		{name: "amount more than or equal", rules: one("order.amount", `{"$more_than_equal":[5500]}`), valid: true},
		{name: "amount less than, missed: the condition's message over the rule's",
			rules: one("order.amount", `{"$less_than":[5500]}`, "Orders under 55.00 only"), ruleMsg: "rule", msg: "Orders under 55.00 only", cond: "1"},
		{name: "amount less than or equal", rules: one("order.amount", `{"$less_than_equal":[5500]}`), valid: true},
		{name: "amount is", rules: one("order.amount", `{"$is":[5500]}`), valid: true},
		{name: "amount is not", rules: one("order.amount", `{"$is_not":[5500]}`), cond: "1"},
		{name: "amount in", rules: one("order.amount", `{"$in":[100, 5500]}`), valid: true},
		{name: "amount not in", rules: one("order.amount", `{"$not_in":[100, 5500]}`), cond: "1"},
		{name: "amount given beats the items' sum", rules: one("order.amount", `{"$is":[9900]}`),
			change: func(in *Input) { in.Order.Amount = ptr(9900) }, valid: true},
		{name: "an amount of 0 is given, not the items' sum", rules: one("order.amount", `{"$less_than":[1]}`),
			change: func(in *Input) { in.Order.Amount = ptr(0) }, valid: true},
		{name: "an initial amount of 0 is given, not the amount", rules: one("order.initial_amount", `{"$is":[0]}`),
			change: func(in *Input) { in.Order.InitialAmount = ptr(0) }, valid: true},
		{name: "a line's amount of 0 is given (a free line), not price × quantity", rules: one("order.items.aggregated_amount", `{"$is":[1500]}`),
			change: func(in *Input) { in.Order.Items[0].Amount = ptr(0) }, valid: true},
		{name: "initial amount", rules: one("order.initial_amount", `{"$is":[6000]}`),
			change: func(in *Input) { in.Order.InitialAmount = ptr(6000) }, valid: true},
		{name: "initial amount defaults to the amount", rules: one("order.initial_amount", `{"$is":[5500]}`), valid: true},
		{name: "no order: the amount is unknown", rules: one("order.amount", `{"$more_than":[0]}`),
			change: func(in *Input) { in.Order = nil }, cond: "1"},
		{name: "no order: $is_unknown", rules: one("order.amount", `{"$is_unknown":[]}`),
			change: func(in *Input) { in.Order = nil }, valid: true},
		{name: "two conditions in one rule both hold", rules: one("order.amount", `{"$more_than":[5000],"$less_than":[6000]}`), valid: true},
		{name: "aliases of the reference's examples", rules: one("order.amount", `{"$greater_than_or_equal":[5500],"$less_than_or_equal":[5500]}`), valid: true},
		{name: "items count", rules: one("order.items.count", `{"$is":[2]}`), valid: true},
		{name: "items quantity is the total", rules: one("order.items.quantity", `{"$more_than_equal":[3]}`), valid: true},
		{name: "aggregated quantity", rules: one("order.items.aggregated_quantity", `{"$less_than":[3]}`), cond: "1"},
		{name: "aggregated amount", rules: one("order.items.aggregated_amount", `{"$is":[5500]}`), valid: true},
		{name: "price of any item", rules: one("order.items.price_any", `{"$is":[1500]}`), valid: true},
		{name: "price of each item, missed by the hat", rules: one("order.items.price_each", `{"$more_than":[1500]}`, "Every item above 15.00"),
			msg: "Every item above 15.00", cond: "1"},
		{name: "price of each item", rules: one("order.items.price_each", `{"$more_than_equal":[1500]}`), valid: true},
		{name: "price of each item of no items is unknown", rules: one("order.items.price_each", `{"$more_than":[0]}`),
			change: func(in *Input) { in.Order.Items = nil }, cond: "1"},

		// Items: any, every, none over products, SKUs, collections.
		{name: "any: the hat", rules: one("order.items.any", `{"$is":[{"object":"product","id":"prod_hat"}]}`), valid: true},
		{name: "any: by source id", rules: one("order.items.any", `{"$is":[{"object":"product","source_id":"shirt"}]}`), valid: true},
		{name: "any: by collection", rules: one("order.items.any", `{"$in":[{"object":"products_collection","id":"pc_summer"}]}`), valid: true},
		{name: "any: the SKU without object", rules: one("order.items.any", `{"$is":[{"id":"sku_shirt_m"}]}`), valid: true},
		{name: "any: a product not ordered", rules: one("order.items.any", `{"$is":[{"object":"product","id":"prod_shoes"}]}`, "Add shoes"),
			msg: "Add shoes", cond: "1"},
		{name: "any with nested quantity: the hat is one", rules: one("order.items.any", `{"$is":[{"object":"product","id":"prod_hat"}]}`, "",
			`{"1":`+c("order.items.quantity", `{"$more_than_equal":[2]}`, "Two hats at least")+`}`), msg: "Two hats at least", cond: "1.1"},
		{name: "any with nested price and amount", rules: one("order.items.any", `{"$is":[{"object":"sku","id":"sku_shirt_m"}]}`, "",
			`{"1":`+c("order.items.price", `{"$is":[2000]}`)+`,"2":`+c("order.items.amount", `{"$is":[4000]}`)+`,"logic":"1 and 2"}`), valid: true},
		{name: "every: each listed product is in the order", rules: one("order.items.every",
			`{"$is":[{"object":"product","id":"prod_shirt"},{"object":"product","id":"prod_hat"}]}`), valid: true},
		{name: "every: shoes are missing", rules: one("order.items.every",
			`{"$is":[{"object":"product","id":"prod_shirt"},{"object":"product","id":"prod_shoes"}]}`), ruleMsg: "Buy the set", msg: "Buy the set", cond: "1"},
		{name: "every: the missing product is blamed, not another's failed line", rules: one("order.items.every",
			`{"$is":[{"object":"product","id":"prod_shirt"},{"object":"product","id":"prod_shoes"}]}`, "",
			`{"1":`+c("order.items.quantity", `{"$more_than_equal":[2]}`, "Two of each")+`}`),
			// A shirt line of one before the line of two: the shirts are met, the shoes are not.
			change: func(in *Input) {
				in.Order.Items = append([]Item{{ProductID: "prod_shirt", Quantity: 1, Price: 2000}}, in.Order.Items...)
			},
			ruleMsg: "Buy the set", msg: "Buy the set", cond: "1"},
		{name: "every with nested metadata: the nested message", rules: one("order.items.every", `{"$is":[{"object":"product","id":"prod_hat"}]}`, "",
			`{"1":`+c("order.items.metadata.color", `{"$is":["blue"]}`, "Blue items only")+`}`), ruleMsg: "rule", msg: "Blue items only", cond: "1.1"},
		{name: "every with nested metadata by property", rules: `{"1":{"name":"order.items.every","conditions":{"$is":[{"object":"product","id":"prod_shirt"}]},"rules":{"1":{"name":"order.items.metadata","property":"color","conditions":{"$is":["blue"]}}}}}`,
			valid: true},
		{name: "none: the SKU is there", rules: one("order.items.none", `{"$is":[{"object":"sku","id":"sku_shirt_m"}]}`, "No shirts"), msg: "No shirts", cond: "1"},
		{name: "none: shoes are not", rules: one("order.items.none", `{"$is":[{"object":"product","id":"prod_shoes"}]}`), valid: true},
		{name: "aggregated quantity within a listed product", rules: one("order.items.any", `{"$is":[{"object":"product","id":"prod_shirt"}]}`, "",
			`{"1":`+c("order.items.aggregated_quantity", `{"$is":[2]}`)+`}`), valid: true},

		// Order metadata.
		{name: "order metadata by property", rules: `{"1":{"name":"order.metadata","property":"location","conditions":{"$is":["Santorini"]}}}`, valid: true},
		{name: "order metadata by name.key, starts and ends", rules: one("order.metadata.channel", `{"$starts_with":["w"],"$ends_with":["eb"]}`), valid: true},
		{name: "order metadata list contains", rules: one("order.metadata.tags", `{"$contains":["vip"]}`), valid: true},
		{name: "order metadata text contains", rules: one("order.metadata.location", `{"$contains":["tori"]}`), valid: true},
		{name: "order metadata not contain", rules: one("order.metadata.tags", `{"$not_contain":["vip"]}`), cond: "1"},
		{name: "order metadata unknown", rules: one("order.metadata.coupon", `{"$is_unknown":true}`), valid: true},
		{name: "order metadata has value, missed", rules: one("order.metadata.coupon", `{"$has_value":[]}`, "Give a coupon"), msg: "Give a coupon", cond: "1"},
		{name: "order metadata date after", rules: one("order.metadata.pickup", `{"$after":["2026-05-01"]}`), valid: true},
		{name: "order metadata date before, missed", rules: one("order.metadata.pickup", `{"$before":["2026-05-01T00:00:00Z"]}`), cond: "1"},
		{name: "order metadata boolean", rules: one("order.metadata.gift", `{"$is":[true]}`), valid: true},
		{name: "order metadata number from a decoder", rules: one("order.metadata.floor", `{"$more_than":[2.5]}`), valid: true},

		// Customer.
		{name: "customer id", rules: one("customer.id", `{"$is":["cust_1"]}`), valid: true},
		{name: "customer source id ends with", rules: one("customer.source_id", `{"$ends_with":["@example.com"]}`), valid: true},
		{name: "customer source id in, missed", rules: one("customer.source_id", `{"$in":["bob@example.com"]}`), cond: "1"},
		{name: "no customer: id unknown", rules: one("customer.id", `{"$is_unknown":[]}`), change: noCustomer, valid: true},
		{name: "no customer: $is_not holds", rules: one("customer.metadata.tier", `{"$is_not":["banned"]}`), change: noCustomer, valid: true},
		{name: "customer metadata in", rules: `{"1":{"name":"customer.metadata","property":"tier","conditions":{"$in":["gold","platinum"]}}}`, valid: true},
		{name: "customer metadata number", rules: one("customer.metadata.visits", `{"$more_than":[10]}`), valid: true},
		{name: "customer segment", rules: one("customer.segment", `{"$is":["seg_vip"]}`), valid: true},
		{name: "customer segment not in", rules: one("customer.segment", `{"$not_in":["seg_vip"]}`, "Not for VIPs"), msg: "Not for VIPs", cond: "1"},

		// Redemption counts (the one being validated counts too) and dates.
		{name: "once per customer, redeemed before", rules: one("redemption.count.per_customer", `{"$less_than_equal":[1]}`, "Once per customer"),
			msg: "Once per customer", cond: "1"},
		{name: "once per customer, first time", rules: one("redemption.count.per_customer", `{"$less_than_equal":[1]}`),
			change: func(in *Input) { in.Redemptions.PerCustomer = 0 }, valid: true},
		{name: "per campaign limit reached", rules: one("redemption.count.per_campaign", `{"$less_than":[100]}`), cond: "1"},
		{name: "per day", rules: one("redemption.count.per_day", `{"$less_than_equal":[5]}`), valid: true},
		{name: "date within", rules: one("date", `{"$after":["2026-06-01T00:00:00Z"],"$before":["2026-07-01"]}`), valid: true},
		{name: "date not yet", rules: one("date", `{"$after":["2026-07-01"]}`, "Starts in July"), msg: "Starts in July", cond: "1"},

		// Custom event and request metadata.
		{name: "custom event metadata", rules: `{"1":{"name":"custom_event.metadata","property":"plan","conditions":{"$is":["pro"]}}}`, valid: true},
		{name: "redemption metadata", rules: one("redemption.metadata.channel", `{"$is":["pos"]}`), valid: true},

		// Logic.
		{name: "1 and (2 or 3): 3 saves it", rules: `{"1":` + c("order.amount", `{"$more_than":[5000]}`) + `,"2":` + c("customer.segment", `{"$is":["seg_gold"]}`) +
			`,"3":` + c("customer.metadata.tier", `{"$is":["gold"]}`) + `,"logic":"1 and (2 or 3)"}`, valid: true},
		{name: "1 and (2 or 3): both fail, the first blamed", rules: `{"1":` + c("order.amount", `{"$more_than":[5000]}`) +
			`,"2":` + c("customer.segment", `{"$is":["seg_gold"]}`, "Gold segment only") + `,"3":` + c("customer.metadata.tier", `{"$is":["platinum"]}`, "Platinum only") +
			`,"logic":"1 and (2 or 3)"}`, msg: "Gold segment only", cond: "2"},
		{name: "(1 or 2) and 3: 3 fails", rules: `{"1":` + c("order.amount", `{"$less_than":[10]}`) + `,"2":` + c("customer.id", `{"$is":["cust_1"]}`) +
			`,"3":` + c("order.items.count", `{"$more_than":[5]}`, "More than five lines") + `,"logic":"(1 OR 2) AND 3"}`, msg: "More than five lines", cond: "3"},
		{name: "or binds looser than and", rules: `{"1":` + c("order.amount", `{"$less_than":[10]}`) + `,"2":` + c("customer.id", `{"$is":["x"]}`) +
			`,"3":` + c("customer.id", `{"$is":["cust_1"]}`) + `,"logic":"1 and 2 or 3"}`, valid: true},
		{name: "without logic every condition holds", rules: `{"1":` + c("order.amount", `{"$more_than":[10]}`) + `,"2":` + c("customer.id", `{"$is":["x"]}`, "Not you") + `}`,
			msg: "Not you", cond: "2"},
		{name: "junction or", rules: `{"1":` + c("order.amount", `{"$less_than":[10]}`) + `,"2":` + c("customer.id", `{"$is":["cust_1"]}`) + `,"junction":"OR"}`, valid: true},
		{name: "keys numbered past 9 sort as numbers", rules: `{"10":` + c("customer.id", `{"$is":["x"]}`, "ten") + `,"2":` + c("customer.id", `{"$is":["y"]}`, "two") + `}`,
			msg: "two", cond: "2"},
		{name: "a rule with nested rules on a plain condition", rules: one("order.amount", `{"$more_than":[10]}`, "",
			`{"1":`+c("customer.segment", `{"$has_value":true}`)+`,"2":`+c("customer.metadata.visits", `{"$less_than":[5]}`, "Frequent visitors only")+`,"logic":"1 and 2"}`),
			ruleMsg: "rule", msg: "Frequent visitors only", cond: "1.2"},
		{name: "no message anywhere", rules: one("customer.id", `{"$is":["x"]}`), msg: "", cond: "1"},
		{name: "empty rules", rules: `{}`, valid: true},
		// $in: [] is equal to nothing; conditions: {} tests nothing (the
		// reference's own example nests one).
		{name: "$in [] matches nothing", rules: one("customer.id", `{"$in":[]}`), cond: "1"},
		{name: "$not_in [] matches everything", rules: one("order.amount", `{"$not_in":[]}`), valid: true},
		{name: "items $in [] matches no line", rules: one("order.items.any", `{"$in":[]}`), cond: "1"},
		{name: "empty conditions hold", rules: one("order.amount", `{}`), valid: true},
		{name: "empty conditions hold with no order", rules: one("order.amount", `{}`), change: func(in *Input) { in.Order = nil }, valid: true},
		{name: "empty conditions of an items rule hold", rules: one("order.items.every", `{}`), valid: true},
		{name: "empty conditions, the nested rules still apply", rules: one("order.amount", `{}`, "", `{"1":`+c("customer.id", `{"$is":["x"]}`, "only x")+`}`),
			msg: "only x", cond: "1.1"},
		{name: "the reference's empty logic", rules: `{"logic":""}`, valid: true},
	}
	if len(rows) < 30 {
		t.Fatalf("only %d rows", len(rows))
	}
	runRows(t, rows)
}

func TestApplicableTo(t *testing.T) {
	for _, r := range []struct {
		doc  string
		want []int
	}{
		{`{"included":[{"object":"product","id":"prod_shirt","effect":"APPLY_TO_EVERY"}],"excluded":[],"included_all":false}`, []int{0}},
		{`{"included":[],"excluded":[{"object":"product","id":"prod_hat"}],"included_all":true}`, []int{0}},
		{`{"excluded":[{"object":"sku","source_id":"shirt-m"}]}`, []int{1}},
		{`{"included":[{"object":"products_collection","id":"pc_winter"}]}`, []int{}},
		{`{"included":[],"excluded":[],"included_all":false}`, nil},
	} {
		t.Run(r.doc, func(t *testing.T) {
			p, err := Compile(nil, nil, json.RawMessage(r.doc))
			if err != nil {
				t.Fatal(err)
			}
			in := baseInput()
			if got := p.Run("val_1", &in).Applicable; !reflect.DeepEqual(got, r.want) {
				t.Errorf("%s: applicable %v, want %v", r.doc, got, r.want)
			}
		})
	}
}

func ptr(n int64) *int64 { return &n }

// A line's price × quantity, or the lines' sum, beyond what rules compare
// exactly is a 400 naming the line, not a wrapped amount.
func TestOrderAmountsOutOfRangeRefused(t *testing.T) {
	huge := int64(1) << 40
	for _, r := range []struct {
		items []Item
		want  string
	}{
		{[]Item{{Price: huge, Quantity: huge}}, "order.items[0]: price × quantity"},
		{[]Item{{Price: 1, Quantity: 1}, {Price: -huge, Quantity: huge}}, "order.items[1]: price × quantity"},
		{[]Item{{Price: 1 << 62, Quantity: 4}}, "order.items[0]: price × quantity"}, // wraps to 0 in int64
		{[]Item{{Amount: ptr(maxSafeInt)}, {Amount: ptr(1)}}, "order.items[1]: the items' amounts add up"},
		{[]Item{{Amount: ptr(-1 << 62)}}, "order.items[0]: the items' amounts add up"},
	} {
		t.Run(r.want, func(t *testing.T) {
			err := (&Order{Items: r.items}).Check()
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Details, r.want) {
				t.Errorf("%+v: got %v, want a 400 saying %q", r.items, err, r.want)
			}
		})
	}
	for _, o := range []*Order{nil, {}, {Items: []Item{{Price: 1 << 26, Quantity: 1 << 26}, {Price: 5, Quantity: 0}, {Amount: ptr(0)}}}} {
		if err := o.Check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// Qualifications' scopes: AUDIENCE reads only the customer's conditions
// (the order's, counts, dates and items hold, their nested customer
// conditions still read); WITHOUT_CUSTOMER reads all but the customer's.
func TestScopes(t *testing.T) {
	bigOrder := c("order.amount", `{"$more_than":[100000]}`)
	silver := c("customer.metadata.tier", `{"$is":["silver"]}`)
	gold := c("customer.metadata.tier", `{"$is":["gold"]}`)
	shoes := c("order.items.any", `{"$is":[{"object":"product","id":"prod_shoes"}]}`, "", `{"1":`+c("order.items.price", `{"$more_than":[1]}`)+`}`)
	for _, r := range []struct {
		name  string
		rules string
		scope Scope
		valid bool
	}{
		{"all: the order fails", `{"1":` + bigOrder + `,"2":` + gold + `,"logic":"1 and 2"}`, ScopeAll, false},
		{"audience: the order holds", `{"1":` + bigOrder + `,"2":` + gold + `,"logic":"1 and 2"}`, ScopeAudience, true},
		{"audience: the customer still fails", `{"1":` + bigOrder + `,"2":` + silver + `,"logic":"1 and 2"}`, ScopeAudience, false},
		{"audience: items and counts hold", `{"1":` + shoes + `,"2":` + c("redemption.count.per_campaign", `{"$less_than":[2]}`) +
			`,"3":` + c("date", `{"$before":["2020-01-01T00:00:00Z"]}`) + `,"logic":"1 and 2 and 3"}`, ScopeAudience, true},
		{"audience: a customer condition nested in an order's", one("order.amount", `{"$more_than":[100000]}`, "", `{"1":`+silver+`}`), ScopeAudience, false},
		{"without customer: the customer holds", `{"1":` + silver + `,"logic":"1"}`, ScopeWithoutCustomer, true},
		{"without customer: the order still fails", `{"1":` + silver + `,"2":` + bigOrder + `,"logic":"1 and 2"}`, ScopeWithoutCustomer, false},
	} {
		t.Run(r.name, func(t *testing.T) {
			p, err := Compile(json.RawMessage(r.rules), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			in := baseInput()
			in.Scope = r.scope
			if v := p.Run("val_1", &in); v.Valid != r.valid {
				t.Errorf("%s: valid %v, want %v", r.name, v.Valid, r.valid)
			}
		})
	}
}

// NamesItemOf finds the products, SKUs and collections rules require
// (any, every; not none), at any depth.
func TestNamesItemOf(t *testing.T) {
	o := baseInput().Order
	for _, r := range []struct {
		rules string
		want  bool
	}{
		{one("order.items.any", `{"$is":[{"object":"product","id":"prod_hat"}]}`), true},
		{one("order.items.every", `{"$in":[{"object":"products_collection","id":"pc_summer"}]}`), true},
		{one("order.items.none", `{"$is":[{"object":"product","id":"prod_hat"}]}`), false},
		{one("order.items.any", `{"$is":[{"object":"product","id":"prod_shoes"}]}`), false},
		{one("order.amount", `{}`, "", one("order.items.any", `{"$is":[{"object":"sku","source_id":"shirt-m"}]}`)), true},
		{one("order.amount", `{"$more_than":[1]}`), false},
	} {
		t.Run(r.rules, func(t *testing.T) {
			p, err := Compile(json.RawMessage(r.rules), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.NamesItemOf(o); got != r.want {
				t.Errorf("%s: %v, want %v", r.rules, got, r.want)
			}
		})
	}
}

// A rule says whether it reads redemption counts, at any depth, so that
// the engine counts only for those that do.
func TestRulesSayWhetherTheyReadCounts(t *testing.T) {
	for rules, want := range map[string]bool{
		`{"1": {"name": "order.amount", "conditions": {"$more_than": [1000]}}, "logic": "1"}`:                                                                                                     false,
		`{"1": {"name": "redemption.count.per_customer", "conditions": {"$less_than": [3]}}, "logic": "1"}`:                                                                                       true,
		`{"1": {"name": "order.amount", "conditions": {"$more_than": [1]}, "rules": {"1": {"name": "redemption.count.per_day", "conditions": {"$less_than": [9]}}, "logic": "1"}}, "logic": "1"}`: true,
	} {
		t.Run(rules, func(t *testing.T) {
			p, err := Compile(json.RawMessage(rules), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.ReadsCounts(); got != want {
				t.Errorf("%s: reads counts %v, want %v", rules, got, want)
			}
		})
	}
}
