package qualifications_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// qualFixture is a project with the customer ann (level gold) holding four
// vouchers and bob (no level) holding none, and a PROMOTION campaign of
// eight tiers. Every one takes a different discount off the big order, so
// BEST_DEAL gives one order to compare.
//
//	wallet  W-PLAIN      7 %, category Cat
//	        GoldCoupons  a campaign's voucher, 300 off, rule gold (on the campaign), campaign category Cat
//	        W-ITEM-B     40 off each item of prod_1 (rule onlyB: applicable_to prod_1)
//	        W-GIFT       a gift card of 1000
//	tiers   Everyone 100 off · Gold 10 % (gold) · Big 500 off (amount > 10000) · GoldBig 700 off (gold, big)
//	        NeedsA 250 off (the order has prod_0) · ItemB 50 off each prod_1 (onlyB)
//	        GoldItemB 30 off each prod_1 (gold, onlyB) · FreeA one prod_0 free (UNIT)
type qualFixture struct {
	a                stacktest.API
	cat              string
	promo, coupons   string // campaign ids
	everyone, gold   string // tier ids
	plainID          string // W-PLAIN's v_ id
	goldRule         string
	bigOrder, onlyB1 map[string]any
}

func newQualFixture(t *testing.T) *qualFixture {
	a := stacktest.NewAPI(t)
	f := &qualFixture{a: a}
	rule := func(name string, rules map[string]any, applicable map[string]any) string {
		body := map[string]any{"name": name, "type": "advanced", "rules": rules}
		if applicable != nil {
			body["applicable_to"] = applicable
		}
		return a.OK("POST", "/v1/validation-rules", body)["id"].(string)
	}
	f.goldRule = rule("gold", map[string]any{"1": map[string]any{"name": "customer.metadata", "property": "level",
		"conditions": map[string]any{"$is": []any{"gold"}}}, "logic": "1"}, nil)
	big := rule("big", map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{10000}}},
		"logic": "1"}, nil)
	needsA := rule("needs A", map[string]any{"1": map[string]any{"name": "order.items.any",
		"conditions": map[string]any{"$is": []any{map[string]any{"object": "product", "id": "prod_0"}}}}, "logic": "1"}, nil)
	onlyB := rule("only B", map[string]any{}, map[string]any{"included": []any{map[string]any{"object": "product", "id": "prod_1",
		"effect": "APPLY_TO_EVERY"}}})
	f.cat = a.OK("POST", "/v1/categories", map[string]any{"name": "Cat"})["id"].(string)

	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"level": "gold"}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob"})
	publish := func(body map[string]any) {
		body["customer"] = map[string]any{"source_id": "ann"}
		a.OK("POST", "/v1/publications", body)
	}
	plain := stacktest.PercentOff(7)
	plain["category_id"] = f.cat
	f.plainID = a.Voucher("W-PLAIN", plain)["id"].(string)
	publish(map[string]any{"voucher": "W-PLAIN"})
	f.coupons = a.OK("POST", "/v1/campaigns", map[string]any{"name": "GoldCoupons", "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 1,
		"category_id": f.cat, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 300}}})["id"].(string)
	a.OK("POST", "/v1/validation-rules/"+f.goldRule+"/assignments", map[string]any{"related_object_type": "campaign", "related_object_id": f.coupons})
	publish(map[string]any{"campaign": map[string]any{"name": "GoldCoupons"}})
	itemB := a.Voucher("W-ITEM-B", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 40, "effect": "APPLY_TO_ITEMS"}})
	a.OK("POST", "/v1/validation-rules/"+onlyB+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": itemB["id"]})
	publish(map[string]any{"voucher": "W-ITEM-B"})
	a.Voucher("W-GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1000}})
	publish(map[string]any{"voucher": "W-GIFT"})

	tier := func(name string, discount map[string]any, rules ...string) map[string]any {
		t := map[string]any{"name": name, "action": map[string]any{"discount": discount}}
		if len(rules) > 0 {
			rs := []any{}
			for _, r := range rules {
				rs = append(rs, r)
			}
			t["validation_rules"] = rs
		}
		return t
	}
	amount := func(n int, effect string) map[string]any {
		return map[string]any{"type": "AMOUNT", "amount_off": n, "effect": effect}
	}
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{
		tier("Everyone", amount(100, "APPLY_TO_ORDER")),
		tier("Gold", map[string]any{"type": "PERCENT", "percent_off": 10}, f.goldRule),
		tier("Big", amount(500, "APPLY_TO_ORDER"), big),
		tier("GoldBig", amount(700, "APPLY_TO_ORDER"), f.goldRule, big),
		tier("NeedsA", amount(250, "APPLY_TO_ORDER"), needsA),
		tier("ItemB", amount(50, "APPLY_TO_ITEMS"), onlyB),
		tier("GoldItemB", amount(30, "APPLY_TO_ITEMS"), f.goldRule, onlyB),
		tier("FreeA", map[string]any{"type": "UNIT", "unit_off": 1, "unit_type": "prod_0", "effect": "ADD_MISSING_ITEMS",
			"product": map[string]any{"id": "prod_0"}}),
	}}})
	f.promo = c["id"].(string)
	for _, x := range c["promotion"].(map[string]any)["tiers"].([]any) {
		m := x.(map[string]any)
		switch m["name"] {
		case "Everyone":
			f.everyone = m["id"].(string)
		case "Gold":
			f.gold = m["id"].(string)
		}
	}
	f.bigOrder = stacktest.Order([2]int{6000, 1}, [2]int{6000, 1})
	f.onlyB1 = map[string]any{"items": []any{map[string]any{"product_id": "prod_1", "price": 2000, "quantity": 1}}}
	return f
}

// qualify asks for a qualification sorted BEST_DEAL, with the options
// given, and lists the answer's redeemables by label: a tier's name, a
// campaign voucher's campaign, another voucher's code.
func (f *qualFixture) qualify(t *testing.T, scenario, customer string, order map[string]any, options map[string]any) []string {
	t.Helper()
	list := f.qualifyList(t, scenario, customer, order, options)
	var out []string
	for _, d := range list["data"].([]any) {
		out = append(out, label(d.(map[string]any)))
	}
	return out
}

func (f *qualFixture) qualifyList(t *testing.T, scenario, customer string, order map[string]any, options map[string]any) map[string]any {
	t.Helper()
	opts := map[string]any{"limit": 50, "sorting_rule": "BEST_DEAL"}
	for k, v := range options {
		opts[k] = v
	}
	body := map[string]any{"options": opts}
	if scenario != "" {
		body["scenario"] = scenario
	}
	if customer != "" {
		body["customer"] = map[string]any{"source_id": customer}
	}
	if order != nil {
		body["order"] = order
	}
	return f.a.OK("POST", "/v1/qualifications", body)["redeemables"].(map[string]any)
}

func label(m map[string]any) string {
	switch {
	case m["object"] == "promotion_tier" || m["object"] == "promotion_stack":
		return m["name"].(string)
	case m["campaign_name"] != nil:
		return m["campaign_name"].(string)
	}
	return m["id"].(string)
}

func same(got []string, want string) bool { return strings.Join(got, " ") == want }

// Every scenario answers exactly its redeemables: AUDIENCE_ONLY reads only
// the customer's conditions; PRODUCTS and PRODUCTS_DISCOUNT leave the
// customer out and keep the tiers for the order's products (discounted, or
// required by a rule) or only those discounting them; their BY_CUSTOMER
// twins judge the customer and add the wallet.
func TestQualificationScenarios(t *testing.T) {
	t.Parallel()
	f := newQualFixture(t)
	cases := []struct {
		scenario, customer string
		order              map[string]any
		want               string
	}{
		{"ALL", "ann", f.bigOrder, "FreeA Gold W-GIFT W-PLAIN GoldBig Big GoldCoupons NeedsA Everyone ItemB W-ITEM-B GoldItemB"},
		{"", "ann", f.bigOrder, "FreeA Gold W-GIFT W-PLAIN GoldBig Big GoldCoupons NeedsA Everyone ItemB W-ITEM-B GoldItemB"},
		{"CUSTOMER_WALLET", "ann", f.bigOrder, "W-GIFT W-PLAIN GoldCoupons W-ITEM-B"},
		// A small order of prod_1 alone: ALL refuses Big, GoldBig and
		// NeedsA; AUDIENCE_ONLY reads only the customer and keeps them.
		{"ALL", "ann", f.onlyB1, "W-GIFT GoldCoupons Gold W-PLAIN Everyone ItemB W-ITEM-B GoldItemB FreeA"},
		{"AUDIENCE_ONLY", "ann", f.onlyB1, "W-GIFT GoldBig Big GoldCoupons NeedsA Gold W-PLAIN Everyone ItemB W-ITEM-B GoldItemB FreeA"},
		{"AUDIENCE_ONLY", "bob", f.onlyB1, "Big NeedsA Everyone ItemB FreeA"},
		{"PRODUCTS", "ann", f.bigOrder, "FreeA NeedsA ItemB GoldItemB"},
		{"PRODUCTS", "bob", f.bigOrder, "FreeA NeedsA ItemB GoldItemB"},
		{"PRODUCTS", "", f.bigOrder, "FreeA NeedsA ItemB GoldItemB"},
		{"PRODUCTS", "", f.onlyB1, "ItemB GoldItemB"},
		{"PRODUCTS_DISCOUNT", "ann", f.bigOrder, "FreeA ItemB GoldItemB"},
		{"PRODUCTS_BY_CUSTOMER", "ann", f.bigOrder, "FreeA NeedsA ItemB W-ITEM-B GoldItemB"},
		{"PRODUCTS_BY_CUSTOMER", "bob", f.bigOrder, "FreeA NeedsA ItemB"},
		{"PRODUCTS_DISCOUNT_BY_CUSTOMER", "ann", f.bigOrder, "FreeA ItemB W-ITEM-B GoldItemB"},
		{"PRODUCTS_DISCOUNT_BY_CUSTOMER", "bob", f.bigOrder, "FreeA ItemB"},
	}
	for _, c := range cases {
		if got := f.qualify(t, c.scenario, c.customer, c.order, nil); !same(got, c.want) {
			t.Errorf("%s for %s: %v\n want %s", c.scenario, c.customer, got, c.want)
		}
	}
	a := f.a
	// PROMOTION_STACKS: the stacks whose every tier qualifies, each with
	// its tiers applied in its order.
	stack := func(name string, tiers ...string) {
		a.OK("POST", "/v1/promotions/"+f.promo+"/stacks", map[string]any{"name": name, "tiers": map[string]any{"ids": tiers}})
	}
	var big string
	for _, x := range a.OK("GET", "/v1/promotions/"+f.promo+"/tiers?limit=100", nil)["tiers"].([]any) {
		if m := x.(map[string]any); m["name"] == "Big" {
			big = m["id"].(string)
		}
	}
	stack("GoldPair", f.gold, f.everyone)
	stack("BigPair", big, f.everyone)
	for _, c := range []struct {
		customer string
		order    map[string]any
		want     string
	}{{"ann", f.bigOrder, "GoldPair BigPair"}, {"bob", f.bigOrder, "BigPair"}, {"ann", f.onlyB1, "GoldPair"}, {"bob", f.onlyB1, ""}} {
		if got := f.qualify(t, "PROMOTION_STACKS", c.customer, c.order, nil); !same(got, c.want) {
			t.Errorf("PROMOTION_STACKS for %s: %v, want %s", c.customer, got, c.want)
		}
	}
	first := f.qualifyList(t, "PROMOTION_STACKS", "ann", f.bigOrder, nil)["data"].([]any)[0].(map[string]any)
	if first["object"] != "promotion_stack" || stacktest.Num(first["order"].(map[string]any)["total_discount_amount"]) != 1300 ||
		len(first["tiers"].(map[string]any)["ids"].([]any)) != 2 || len(first["result"].(map[string]any)["promotion_tiers"].([]any)) != 2 {
		t.Errorf("a qualified stack: %v", first)
	}
	for _, s := range []string{"PRODUCTS", "PRODUCTS_DISCOUNT", "PRODUCTS_BY_CUSTOMER", "PRODUCTS_DISCOUNT_BY_CUSTOMER"} {
		e := a.Fails("POST", "/v1/qualifications", map[string]any{"scenario": s, "customer": map[string]any{"source_id": "ann"}}, 400, "invalid_payload")
		if !strings.Contains(fmt.Sprint(e["details"]), "order.items") {
			t.Errorf("%s without items: %v", s, e)
		}
	}
}

// options.filters narrow the qualified redeemables by each field and
// condition, joined with and (the default) or or; a filter the reference
// does not define is a 400 naming it.
func TestQualificationFilters(t *testing.T) {
	t.Parallel()
	f := newQualFixture(t)
	cond := func(field, op string, values any) map[string]any {
		return map[string]any{field: map[string]any{"conditions": map[string]any{op: values}}}
	}
	join := func(junction string, fs ...map[string]any) map[string]any {
		out := map[string]any{}
		if junction != "" {
			out["junction"] = junction
		}
		for _, x := range fs {
			for k, v := range x {
				if old, ok := out[k]; ok { // two conditions on one field
					for op, vs := range v.(map[string]any)["conditions"].(map[string]any) {
						old.(map[string]any)["conditions"].(map[string]any)[op] = vs
					}
					continue
				}
				out[k] = v
			}
		}
		return out
	}
	tiers := "FreeA Gold GoldBig Big NeedsA Everyone ItemB GoldItemB"
	wallet := "W-GIFT W-PLAIN GoldCoupons W-ITEM-B"
	cases := []struct {
		name    string
		filters map[string]any
		want    string
	}{
		{"resource_type $is", cond("resource_type", "$is", []any{"voucher"}), wallet},
		{"resource_type $not_in", cond("resource_type", "$not_in", []any{"voucher", "campaign"}), tiers},
		{"resource_type $is_not", cond("resource_type", "$is_not", []any{"promotion_tier"}), wallet},
		{"resource_type $in", cond("resource_type", "$in", []any{"promotion_tier"}), tiers},
		{"campaign_type $in", cond("campaign_type", "$in", []any{"PROMOTION"}), tiers},
		{"campaign_type $is_not", cond("campaign_type", "$is_not", []any{"PROMOTION"}), wallet},
		{"campaign_type $is", cond("campaign_type", "$is", []any{"REFERRAL_PROGRAM"}), ""},
		{"campaign_type $not_in", cond("campaign_type", "$not_in", []any{"PROMOTION", "DISCOUNT_COUPONS"}), "W-GIFT W-PLAIN W-ITEM-B"},
		{"campaign_id $is", cond("campaign_id", "$is", []any{f.coupons}), "GoldCoupons"},
		{"campaign_id $in", cond("campaign_id", "$in", []any{f.coupons, f.promo}), "FreeA Gold GoldBig Big GoldCoupons NeedsA Everyone ItemB GoldItemB"},
		{"campaign_id $is_unknown", cond("campaign_id", "$is_unknown", []any{}), "W-GIFT W-PLAIN W-ITEM-B"},
		{"campaign_id $has_value", cond("campaign_id", "$has_value", []any{}), "FreeA Gold GoldBig Big GoldCoupons NeedsA Everyone ItemB GoldItemB"},
		{"campaign_id $not_in", cond("campaign_id", "$not_in", []any{f.promo}), wallet},
		{"category_id $is", cond("category_id", "$is", []any{f.cat}), "W-PLAIN GoldCoupons"},
		{"category_id $not_in", cond("category_id", "$not_in", []any{f.cat}), "FreeA Gold W-GIFT GoldBig Big NeedsA Everyone ItemB W-ITEM-B GoldItemB"},
		{"category_id $has_value", cond("category_id", "$has_value", nil), "W-PLAIN GoldCoupons"},
		{"resource_id $in", cond("resource_id", "$in", []any{f.everyone, "W-PLAIN"}), "W-PLAIN Everyone"},
		{"resource_id $is by the voucher's id", cond("resource_id", "$is", []any{f.plainID}), "W-PLAIN"},
		{"resource_id $is_not", cond("resource_id", "$is_not", []any{f.everyone}), "FreeA Gold W-GIFT W-PLAIN GoldBig Big GoldCoupons NeedsA ItemB W-ITEM-B GoldItemB"},
		{"voucher_type $is", cond("voucher_type", "$is", []any{"GIFT_VOUCHER"}), "W-GIFT"},
		{"voucher_type $in", cond("voucher_type", "$in", []any{"DISCOUNT_VOUCHER"}), "W-PLAIN GoldCoupons W-ITEM-B"},
		{"voucher_type $is_unknown", cond("voucher_type", "$is_unknown", []any{}), tiers},
		{"code $is takes the first value", cond("code", "$is", []any{"W-PLAIN", "W-GIFT"}), "W-PLAIN"},
		{"code $not_in", cond("code", "$not_in", []any{"W-PLAIN", "W-GIFT"}), "FreeA Gold GoldBig Big GoldCoupons NeedsA Everyone ItemB W-ITEM-B GoldItemB"},
		{"code $has_value", cond("code", "$has_value", []any{}), wallet},
		{"holder_role $is", cond("holder_role", "$is", []any{"REFERRER"}), ""},
		{"holder_role $in", cond("holder_role", "$in", []any{"OWNER"}), "W-GIFT W-PLAIN GoldCoupons W-ITEM-B"},
		{"holder_role $is_not", cond("holder_role", "$is_not", []any{"OWNER"}), tiers + ""},
		{"holder_role $is_unknown", cond("holder_role", "$is_unknown", []any{}), tiers},
		{"holder_role $is REFEREE", cond("holder_role", "$is", []any{"REFEREE"}), ""},
		{"junction or", join("or", cond("resource_type", "$is", []any{"promotion_tier"}), cond("code", "$is", []any{"W-PLAIN"})),
			"FreeA Gold W-PLAIN GoldBig Big NeedsA Everyone ItemB GoldItemB"},
		{"junction AND", join("AND", cond("campaign_type", "$in", []any{"PROMOTION"}), cond("resource_id", "$in", []any{f.everyone, f.gold})),
			"Gold Everyone"},
		{"and by default", join("", cond("campaign_id", "$has_value", nil), cond("category_id", "$is", []any{f.cat})), "GoldCoupons"},
		{"two conditions on one field", join("", cond("code", "$has_value", nil), cond("code", "$is_not", []any{"W-GIFT"})),
			"W-PLAIN GoldCoupons W-ITEM-B"},
	}
	for _, c := range cases {
		got := f.qualify(t, "ALL", "ann", f.bigOrder, map[string]any{"filters": c.filters})
		if !same(got, c.want) {
			t.Errorf("%s: %v\n want %s", c.name, got, c.want)
		}
	}
	// Filters and scenarios narrow together; total counts what passes.
	l := f.qualifyList(t, "CUSTOMER_WALLET", "ann", f.bigOrder, map[string]any{"filters": cond("voucher_type", "$is", []any{"GIFT_VOUCHER"})})
	if stacktest.Num(l["total"]) != 1 || label(l["data"].([]any)[0].(map[string]any)) != "W-GIFT" {
		t.Errorf("wallet's gift cards: %v", l)
	}

	for _, bad := range []struct {
		filters any
		names   string
	}{
		{cond("color", "$is", []any{"red"}), "color"},
		{cond("code", "$contains", []any{"W"}), "$contains"},
		{map[string]any{"junction": "xor"}, "junction"},
		{cond("campaign_type", "$in", []any{"FOO"}), "FOO"},
		{cond("resource_type", "$is", []any{"sku"}), "sku"},
		{cond("holder_role", "$in", []any{"HOLDER"}), "HOLDER"},
		{cond("code", "$in", 5), "code.conditions.$in"},
		{cond("code", "$in", []any{}), "code.conditions.$in"},
		{map[string]any{"code": map[string]any{"cond": map[string]any{}}}, "code.cond"},
		{map[string]any{"code": "W-PLAIN"}, "code"},
		{"campaign_id", "options.filters"},
	} {
		e := f.a.Fails("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "ann"},
			"options": map[string]any{"filters": bad.filters}}, 400, "invalid_payload")
		if d := fmt.Sprint(e["details"]); !strings.Contains(d, bad.names) || !strings.Contains(d, "options.filters") {
			t.Errorf("filters %v: %v", bad.filters, e)
		}
	}
}

// options.expand adds each redeemable's category (with the stacking rules'
// type) and its rules' assignments; redeemable is taken; anything else is
// a 400.
func TestQualificationExpand(t *testing.T) {
	t.Parallel()
	f := newQualFixture(t)
	pick := map[string]any{"resource_id": map[string]any{"conditions": map[string]any{"$in": []any{"W-PLAIN", f.gold}}}}
	byLabel := func(l map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, d := range l["data"].([]any) {
			m := d.(map[string]any)
			out[label(m)] = m
		}
		return out
	}
	plain := byLabel(f.qualifyList(t, "ALL", "ann", f.bigOrder, map[string]any{"filters": pick}))
	if len(plain) != 2 || len(plain["W-PLAIN"]["categories"].([]any)) != 0 || plain["Gold"]["validation_rules_assignments"] != nil {
		t.Fatalf("without expand: %v", plain)
	}
	got := byLabel(f.qualifyList(t, "ALL", "ann", f.bigOrder, map[string]any{"filters": pick,
		"expand": []any{"redeemable", "category", "validation_rules"}}))
	cats := got["W-PLAIN"]["categories"].([]any)
	if len(cats) != 1 || cats[0].(map[string]any)["id"] != f.cat || cats[0].(map[string]any)["name"] != "Cat" ||
		cats[0].(map[string]any)["object"] != "category" || len(got["Gold"]["categories"].([]any)) != 0 {
		t.Errorf("categories: %v / %v", got["W-PLAIN"]["categories"], got["Gold"]["categories"])
	}
	asg := got["Gold"]["validation_rules_assignments"].(map[string]any)
	data := asg["data"].([]any)
	if stacktest.Num(asg["total"]) != 1 || len(data) != 1 || data[0].(map[string]any)["rule_id"] != f.goldRule ||
		data[0].(map[string]any)["related_object_id"] != f.gold || data[0].(map[string]any)["validation_status"] != "VALID" {
		t.Errorf("Gold's assignments: %v", asg)
	}
	if p := got["W-PLAIN"]["validation_rules_assignments"].(map[string]any); stacktest.Num(p["total"]) != 0 {
		t.Errorf("W-PLAIN's assignments: %v", p)
	}
	// A campaign voucher shows its campaign's assignment.
	gc := byLabel(f.qualifyList(t, "CUSTOMER_WALLET", "ann", f.bigOrder, map[string]any{"expand": []any{"validation_rules", "category"},
		"filters": map[string]any{"campaign_id": map[string]any{"conditions": map[string]any{"$is": []any{f.coupons}}}}}))["GoldCoupons"]
	if d := gc["validation_rules_assignments"].(map[string]any)["data"].([]any); len(d) != 1 || d[0].(map[string]any)["related_object_id"] != f.coupons {
		t.Errorf("GoldCoupons' assignments: %v", gc["validation_rules_assignments"])
	}
	if c := gc["categories"].([]any); len(c) != 1 || c[0].(map[string]any)["id"] != f.cat {
		t.Errorf("GoldCoupons' category, its campaign's: %v", gc["categories"])
	}
	e := f.a.Fails("POST", "/v1/qualifications", map[string]any{"options": map[string]any{"expand": []any{"everything"}}}, 400, "invalid_payload")
	if !strings.Contains(fmt.Sprint(e["details"]), "everything") {
		t.Errorf("bad expand: %v", e)
	}
}
