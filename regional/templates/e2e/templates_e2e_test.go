package e2e_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func over(amount int) map[string]any {
	return map[string]any{"type": "advanced", "rules": map[string]any{"1": map[string]any{"name": "order.amount",
		"conditions": map[string]any{"$more_than": []any{amount}}}, "logic": "1"}}
}

// sameBut compares two views key by key, but for the keys named: each key
// is reported on its own so a failure names the field that differs.
func sameBut(t *testing.T, what string, want, got map[string]any, but ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, k := range but {
		skip[k] = true
	}
	for k, w := range want {
		if skip[k] {
			continue
		}
		if g, ok := got[k]; !ok || !reflect.DeepEqual(w, g) {
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			t.Errorf("%s: %s is %s, its source's %s", what, k, gj, wj)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !skip[k] {
			t.Errorf("%s: %s is not in its source", what, k)
		}
	}
}

// ruleOf is the one rule assigned to an object, read whole.
func ruleOf(a stacktest.API, objectID string) map[string]any {
	a.T.Helper()
	as := a.OK("GET", "/v1/validation-rules-assignments?related_object_id="+objectID, nil)["data"].([]any)
	if len(as) != 1 {
		a.T.Fatalf("assignments of %s: %v", objectID, as)
	}
	return a.OK("GET", "/v1/validation-rules/"+as[0].(map[string]any)["rule_id"].(string), nil)
}

// A discount campaign saved as a template and made again equals its source
// but for ids, name, category and dates, with a copy of its validation rule
// as it was when the template was saved (a later edit of the rule stays
// out), and no code count.
func TestCampaignFromTemplateEqualsItsSource(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 100", "type": "advanced",
		"rules": over(10000)["rules"]})
	src := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Autumn", "campaign_type": "DISCOUNT_COUPONS",
		"description": "leaves", "type": "STATIC", "join_once": true, "category": "Seasonal", "vouchers_count": 1,
		"start_date": "2026-09-01T00:00:00Z", "expiration_date": "2026-12-01T00:00:00Z",
		"validity_day_of_week": []any{1, 2, 3}, "activity_duration_after_publishing": "P7D",
		"metadata": map[string]any{"region": "north", "n": 3},
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 15},
			"redemption":  map[string]any{"quantity": 2},
			"code_config": map[string]any{"prefix": "AUT-", "length": 6, "charset": "ABCDEFGH"}}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "campaign",
		"related_object_id": src["id"]})
	src = a.OK("GET", "/v1/campaigns/"+src["id"].(string), nil)

	tpl := a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Seasonal discount", "campaign_id": "Autumn"})
	if tpl["object"] != "campaign_template" || tpl["campaign_type"] != "DISCOUNT_COUPONS" || tpl["name"] != "Seasonal discount" ||
		len(tpl["id"].(string)) < 10 || tpl["id"].(string)[:9] != "camp_tpl_" || tpl["created_at"] == nil {
		t.Fatalf("template: %v", tpl)
	}
	// The rule changes after the template was saved: the template keeps
	// the rule as it was.
	a.OK("PUT", "/v1/validation-rules/"+rule["id"].(string), over(50000))

	setup := a.OK("POST", "/v1/templates/campaigns/"+tpl["id"].(string)+"/campaign-setup", map[string]any{"name": "Winter"})
	made := setup["campaign"].(map[string]any)
	res := setup["created_resources"].([]any)
	if setup["object"] != "campaign_setup" || len(res) != 1 || res[0].(map[string]any)["object"] != "validation_rules" {
		t.Fatalf("setup: %v", setup)
	}
	if made["name"] != "Winter" || made["id"] == src["id"] || made["category"] != nil || made["category_id"] != nil ||
		stacktest.Num(made["vouchers_count"]) != 0 {
		t.Fatalf("made: %v", made)
	}
	got := a.OK("GET", "/v1/campaigns/Winter", nil)
	sameBut(t, "campaign", src, got, "id", "name", "created_at", "updated_at", "category", "category_id", "categories", "vouchers_count")

	copyRule := ruleOf(a, made["id"].(string))
	if copyRule["id"] == rule["id"] || copyRule["id"] != res[0].(map[string]any)["id"] {
		t.Fatalf("the made campaign's rule is %v, the source's %v", copyRule["id"], rule["id"])
	}
	sameBut(t, "rule", rule, copyRule, "id", "name", "created_at", "updated_at", "assignments_count")
	// The same template adds a campaign whose request fields win.
	again := a.OK("POST", "/v1/templates/campaigns/"+tpl["id"].(string)+"/campaign-setup", map[string]any{"name": "Spring",
		"vouchers_count": 1, "voucher": map[string]any{"redemption": map[string]any{"quantity": 5}}})["campaign"].(map[string]any)
	v := again["voucher"].(map[string]any)
	if stacktest.Num(v["redemption"].(map[string]any)["quantity"]) != 5 || v["code_config"].(map[string]any)["prefix"] != "AUT-" ||
		stacktest.Num(again["vouchers_count"]) != 1 {
		t.Fatalf("overridden: %v", again)
	}
}

// A promotion tier saved as a template is added to another promotion
// campaign equal to its source but for ids, name, dates and its place
// in the campaign; a discount
// campaign's template adds a tier with its discount.
func TestTierFromTemplateEqualsItsSource(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "big", "type": "advanced", "rules": over(10000)["rules"]})
	p := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Autumn", "campaign_type": "PROMOTION", "promotion": map[string]any{
		"tiers": []any{map[string]any{"name": "Big", "banner": "Big!", "metadata": map[string]any{"k": "v"},
			"validation_rules": []any{rule["id"]}, "validity_day_of_week": []any{5},
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}}}}})
	src := p["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)
	tpl := a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Big tier", "promotion_tier_id": src["id"]})
	if tpl["campaign_type"] != "DISCOUNT_COUPONS" {
		t.Fatalf("a tier's template: %v", tpl)
	}
	other := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Winter", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{map[string]any{"name": "first", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}}}}})
	setup := a.OK("POST", "/v1/templates/campaigns/"+tpl["id"].(string)+"/tier-setup", map[string]any{"name": "Big again", "campaign_id": other["id"]})
	if setup["object"] != "promotion_tier_setup" || len(setup["created_resources"].([]any)) != 1 {
		t.Fatalf("setup: %v", setup)
	}
	got := a.OK("GET", "/v1/promotions/tiers/"+setup["promotion_tier"].(map[string]any)["id"].(string), nil)
	src = a.OK("GET", "/v1/promotions/tiers/"+src["id"].(string), nil)
	sameBut(t, "tier", src, got, "id", "name", "created_at", "updated_at", "campaign", "campaign_id", "promotion_id", "validation_rule_assignments", "hierarchy")
	if stacktest.Num(got["hierarchy"]) != 2 {
		t.Fatalf("the made tier goes after the campaign's first: %v", got["hierarchy"])
	}
	if r := ruleOf(a, got["id"].(string)); r["id"] == rule["id"] || !reflect.DeepEqual(r["rules"], rule["rules"]) {
		t.Fatalf("the tier's rule: %v", r)
	}

	// A discount campaign's template gives a tier its discount.
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Codes", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 7}}})
	dt := a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Seven", "campaign_id": "Codes"})
	ts := a.OK("POST", "/v1/templates/campaigns/"+dt["id"].(string)+"/tier-setup", map[string]any{"name": "Seven off", "campaign_id": "Winter"})
	d := ts["promotion_tier"].(map[string]any)["action"].(map[string]any)["discount"].(map[string]any)
	if d["type"] != "PERCENT" || stacktest.Num(d["percent_off"]) != 7 || len(ts["created_resources"].([]any)) != 0 {
		t.Fatalf("tier from a campaign template: %v", ts)
	}
	// And a tier's template makes a discount campaign.
	c := a.OK("POST", "/v1/templates/campaigns/"+tpl["id"].(string)+"/campaign-setup", map[string]any{"name": "Big codes"})["campaign"].(map[string]any)
	if c["campaign_type"] != "DISCOUNT_COUPONS" || stacktest.Num(c["voucher"].(map[string]any)["discount"].(map[string]any)["amount_off"]) != 500 {
		t.Fatalf("campaign from a tier's template: %v", c)
	}
}

// What a template refuses: types it cannot keep, names taken, a gift
// campaign's template as a tier, sources and templates that do not exist;
// and the list, update and delete.
func TestTemplateRefusalsAndLifecycle(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Campaign("Points", nil)
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{map[string]any{"name": "first", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}}}}})
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Gift", "campaign_type": "GIFT_VOUCHERS",
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1000}}})
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"name": "x", "campaign_id": "Points"}, 400, "campaign_type_is_not_supported_by_campaign_template")
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"name": "x", "campaign_id": "Promo"}, 400, "campaign_type_is_not_supported_by_campaign_template")
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"name": "x", "campaign_id": "camp_none"}, 404, "not_found")
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"campaign_id": "Gift"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"name": "x"}, 400, "invalid_payload")

	g := a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Gift", "campaign_id": "Gift"})
	if g["campaign_type"] != "GIFT_VOUCHERS" {
		t.Fatalf("gift template: %v", g)
	}
	id := g["id"].(string)
	a.Fails("POST", "/v1/templates/campaigns", map[string]any{"name": "Gift", "campaign_id": "Gift"}, 409, "duplicate_found")
	a.Fails("POST", "/v1/templates/campaigns/"+id+"/campaign-setup", map[string]any{"name": "Gift"}, 409, "duplicate_found")
	a.Fails("POST", "/v1/templates/campaigns/"+id+"/campaign-setup", map[string]any{}, 400, "invalid_payload")
	a.Fails("POST", "/v1/templates/campaigns/"+id+"/tier-setup", map[string]any{"name": "t", "campaign_id": "Promo"}, 400,
		"campaign_type_is_not_supported_by_campaign_template")
	a.Fails("POST", "/v1/templates/campaigns/camp_tpl_none/campaign-setup", map[string]any{"name": "y"}, 404, "not_found")
	made := a.OK("POST", "/v1/templates/campaigns/"+id+"/campaign-setup", map[string]any{"name": "Gift 2"})["campaign"].(map[string]any)
	if made["campaign_type"] != "GIFT_VOUCHERS" || stacktest.Num(made["voucher"].(map[string]any)["gift"].(map[string]any)["amount"]) != 1000 {
		t.Fatalf("gift made: %v", made)
	}

	a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Gift b", "campaign_id": "Gift"})
	u := a.OK("PUT", "/v1/templates/campaigns/"+id, map[string]any{"name": "Gift a", "description": "d"})
	if u["name"] != "Gift a" || u["description"] != "d" || u["updated_at"] == nil {
		t.Fatalf("updated: %v", u)
	}
	a.Fails("PUT", "/v1/templates/campaigns/"+id, map[string]any{"name": "Gift b"}, 409, "duplicate_found")
	l := a.OK("GET", "/v1/templates/campaigns?limit=1&include_total=true", nil)
	if l["data_ref"] != "data" || len(l["data"].([]any)) != 1 || stacktest.Num(l["total"]) != 2 || l["has_more"] != true {
		t.Fatalf("list: %v", l)
	}
	rest := a.OK("GET", "/v1/templates/campaigns?starting_after_id="+l["more_starting_after"].(string), nil)
	if len(rest["data"].([]any)) != 1 || rest["has_more"] != false {
		t.Fatalf("second page: %v", rest)
	}
	// The reference's filters (id, name, campaign_type); the total counts
	// every template, "regardless of the applied filters".
	for q, want := range map[string][]string{
		"filters[name][conditions][$is]=Gift+b":                                                              {"Gift b"},
		"filters[name][conditions][$starts_with]=Gift&order=-id":                                             {"Gift b", "Gift a"},
		"filters[campaign_type][conditions][$is]=DISCOUNT_COUPONS":                                           {},
		"filters[id][conditions][$in]=" + id + "&include_total=true":                                         {"Gift a"},
		"filters[junction]=or&filters[name][conditions][$is]=Gift+a&filters[name][conditions][$ends_with]=b": {"Gift a", "Gift b"},
	} {
		l := a.OK("GET", "/v1/templates/campaigns?"+q, nil)
		var got []string
		for _, d := range l["data"].([]any) {
			got = append(got, d.(map[string]any)["name"].(string))
		}
		if len(got) != len(want) || (len(want) > 0 && strings.Join(got, ",") != strings.Join(want, ",")) {
			t.Fatalf("%s: %v, want %v", q, got, want)
		}
		if strings.Contains(q, "include_total") && stacktest.Num(l["total"]) != 2 {
			t.Fatalf("%s: total %v", q, l["total"])
		}
	}
	a.Fails("GET", "/v1/templates/campaigns?filters[voucher][conditions][$is]=x", nil, 400, "invalid_query_params")
	if r := a.Do("DELETE", "/v1/templates/campaigns/"+id, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	a.Fails("GET", "/v1/templates/campaigns/"+id, nil, 404, "not_found")
	a.Fails("DELETE", "/v1/templates/campaigns/"+id, nil, 404, "not_found")
	// What was made from it stays.
	a.OK("GET", "/v1/campaigns/Gift 2", nil)
}
