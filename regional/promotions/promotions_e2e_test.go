package promotions_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func promotion(a stacktest.API, name string, tiers ...map[string]any) map[string]any {
	a.T.Helper()
	ts := make([]any, len(tiers))
	for i, t := range tiers {
		ts[i] = t
	}
	return a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": ts}})
}

func tier(name string, discount map[string]any) map[string]any {
	return map[string]any{"name": name, "banner": name + "!", "action": map[string]any{"discount": discount}, "metadata": map[string]any{"k": name}}
}

// A PROMOTION campaign and its tiers: created together, read through the
// campaign and the tier endpoints, updated, enabled and disabled, ordered
// by hierarchy, deleted; another project's are 404.
func TestPromotionTiers(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 100", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{10000}}}, "logic": "1"}})
	big := tier("Big spender", map[string]any{"type": "PERCENT", "percent_off": 15})
	big["validation_rules"] = []any{rule["id"]}
	c := promotion(a, "Autumn", tier("Everyone", map[string]any{"type": "AMOUNT", "amount_off": 300}), big)
	id := c["id"].(string)
	list := c["promotion"].(map[string]any)["tiers"].([]any)
	if c["campaign_type"] != "PROMOTION" || len(list) != 2 {
		t.Fatalf("campaign: %v", c)
	}
	t1, t2 := list[0].(map[string]any), list[1].(map[string]any)
	if stacktest.Num(t1["hierarchy"]) != 1 || stacktest.Num(t2["hierarchy"]) != 2 || t2["campaign_id"] != id ||
		stacktest.Num(t2["validation_rule_assignments"].(map[string]any)["total"]) != 1 || t1["banner"] != "Everyone!" {
		t.Fatalf("tiers: %v", list)
	}
	if g := a.OK("GET", "/v1/campaigns/Autumn", nil); len(g["promotion"].(map[string]any)["tiers"].([]any)) != 2 {
		t.Fatalf("campaign read back: %v", g)
	}
	added := a.OK("POST", "/v1/promotions/"+id+"/tiers", tier("Late", map[string]any{"type": "FIXED", "fixed_amount": 5000}))
	if stacktest.Num(added["hierarchy"]) != 3 {
		t.Fatalf("added: %v", added)
	}
	u := a.OK("PUT", "/v1/promotions/tiers/"+t1["id"].(string), map[string]any{"name": "All", "hierarchy": 9,
		"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 400}}})
	if u["name"] != "All" || stacktest.Num(u["hierarchy"]) != 9 || stacktest.Num(u["action"].(map[string]any)["discount"].(map[string]any)["amount_off"]) != 400 {
		t.Fatalf("updated: %v", u)
	}
	if d := a.OK("POST", "/v1/promotions/tiers/"+added["id"].(string)+"/disable", nil); d["active"] != false {
		t.Fatalf("disabled: %v", d)
	}
	l := a.OK("GET", "/v1/promotions/"+id+"/tiers", nil)
	ts := l["tiers"].([]any)
	if stacktest.Num(l["total"]) != 3 || ts[0].(map[string]any)["name"] != "Big spender" || ts[2].(map[string]any)["name"] != "All" {
		t.Fatalf("by hierarchy: %v", l)
	}
	if l := a.OK("GET", "/v1/promotions/tiers?is_available=true", nil); stacktest.Num(l["total"]) != 2 {
		t.Fatalf("available: %v", l["total"])
	}
	if l := a.OK("GET", "/v1/promotions/tiers?limit=1", nil); l["has_more"] != true {
		t.Fatalf("paged: %v", l)
	}
	for _, bad := range []map[string]any{{}, {"name": "x"}, {"name": "x", "action": map[string]any{"discount": map[string]any{"type": "PERCENT"}}},
		{"name": "x", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}, "hierarchy": 0},
		{"name": "x", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}, "validity_day_of_week": []int{8}}} {
		a.Fails("POST", "/v1/promotions/"+id+"/tiers", bad, 400, "invalid_payload")
	}
	a.Fails("POST", "/v1/promotions/"+id+"/tiers", map[string]any{"name": "x", "validation_rules": []any{"val_nothing"},
		"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}}, 404, "not_found")
	a.Fails("POST", "/v1/campaigns", map[string]any{"name": "Empty", "campaign_type": "PROMOTION"}, 400, "invalid_payload")
	// Stacks of the campaign's tiers.
	st := a.OK("POST", "/v1/promotions/"+id+"/stacks", map[string]any{"name": "Pair",
		"tiers": map[string]any{"ids": []any{t1["id"], t2["id"]}, "hierarchy_mode": "MANUAL"}})
	if st["object"] != "promotion_stack" || len(st["tiers"].(map[string]any)["ids"].([]any)) != 2 {
		t.Fatalf("stack: %v", st)
	}
	a.OK("PUT", "/v1/promotions/"+id+"/stacks/"+st["id"].(string), map[string]any{"name": "Renamed", "tiers": map[string]any{"ids": []any{t1["id"]}}})
	if g := a.OK("GET", "/v1/promotions/"+id+"/stacks/"+st["id"].(string), nil); g["name"] != "Renamed" {
		t.Fatalf("stack read back: %v", g)
	}
	// A partial update keeps what it does not send: the reference's body
	// requires nothing.
	stackPath := "/v1/promotions/" + id + "/stacks/" + st["id"].(string)
	if u := a.OK("PUT", stackPath, map[string]any{"name": "Only the name"}); u["name"] != "Only the name" ||
		fmt.Sprint(u["tiers"].(map[string]any)["ids"]) != fmt.Sprint([]any{t1["id"]}) || u["updated_at"] == nil {
		t.Fatalf("a name-only update: %v", u)
	}
	if u := a.OK("PUT", stackPath, map[string]any{"tiers": map[string]any{"ids": []any{t2["id"], t1["id"]}}}); u["name"] != "Only the name" ||
		len(u["tiers"].(map[string]any)["ids"].([]any)) != 2 {
		t.Fatalf("a tiers-only update: %v", u)
	}
	if g := a.OK("GET", stackPath, nil); g["name"] != "Only the name" || g["tiers"].(map[string]any)["ids"].([]any)[0] != t2["id"] {
		t.Fatalf("read back after partial updates: %v", g)
	}
	a.Fails("PUT", stackPath, map[string]any{"name": ""}, 400, "invalid_payload")
	a.Fails("PUT", stackPath, map[string]any{"tiers": map[string]any{"ids": []any{}}}, 400, "invalid_payload")
	if l := a.OK("GET", "/v1/promotions/stacks", nil); stacktest.Num(l["total"]) != 1 {
		t.Fatalf("stacks: %v", l)
	}
	a.Fails("POST", "/v1/promotions/"+id+"/stacks", map[string]any{"name": "Bad", "tiers": map[string]any{"ids": []any{"promo_nothing"}}},
		400, "invalid_payload")
	// Another project sees none of it.
	other.Fails("GET", "/v1/promotions/tiers/"+t1["id"].(string), nil, 404, "not_found")
	other.Fails("GET", "/v1/promotions/"+id+"/tiers", nil, 404, "not_found")
	other.Fails("GET", "/v1/promotions/"+id+"/stacks/"+st["id"].(string), nil, 404, "not_found")
	if l := other.OK("GET", "/v1/promotions/tiers", nil); stacktest.Num(l["total"]) != 0 {
		t.Fatalf("another project's tiers: %v", l)
	}
	// Deleting a tier, then the campaign: its tiers go with it.
	if r := a.Do("DELETE", "/v1/promotions/tiers/"+added["id"].(string), nil); r.Status != 204 {
		t.Fatalf("delete tier: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/promotions/tiers/"+added["id"].(string), nil, 404, "not_found")
	del := a.Do("DELETE", "/v1/campaigns/"+id+"?force=true", nil)
	a.WaitAction(del.JSON(t)["async_action_id"].(string))
	a.Fails("GET", "/v1/promotions/tiers/"+t1["id"].(string), nil, 404, "not_found")
	if l := a.OK("GET", "/v1/promotions/tiers", nil); stacktest.Num(l["total"]) != 0 {
		t.Fatalf("tiers after the campaign's deletion: %v", l)
	}
}

// Tiers are redeemables: validated and redeemed without a code, guarded by
// their rules, offered by qualifications; their summary counts redemptions.
func TestPromotionTiersInTheEngine(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 100", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{10000}}}, "logic": "1"}})
	big := tier("Big", map[string]any{"type": "PERCENT", "percent_off": 20})
	big["validation_rules"] = []any{rule["id"]}
	c := promotion(a, "Engine", tier("Small", map[string]any{"type": "AMOUNT", "amount_off": 300}), big)
	ts := c["promotion"].(map[string]any)["tiers"].([]any)
	small, bigID := ts[0].(map[string]any)["id"].(string), ts[1].(map[string]any)["id"].(string)
	order := func(amount int) map[string]any {
		return map[string]any{"items": []any{map[string]any{"product_id": "p", "price": amount, "quantity": 1}}}
	}
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": small}},
		"order": order(5000)})
	if v["valid"] != true || stacktest.Num(v["order"].(map[string]any)["total_discount_amount"]) != 300 {
		t.Fatalf("small tier: %v", v)
	}
	v = a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": bigID}},
		"order": order(5000)})
	if v["valid"] != false {
		t.Fatalf("big tier on a small order: %v", v)
	}
	q := a.OK("POST", "/v1/qualifications", map[string]any{"order": order(20000), "customer": map[string]any{"source_id": "q"}})
	if stacktest.Num(q["redeemables"].(map[string]any)["total"]) != 2 {
		t.Fatalf("qualifications on a big order: %v", q)
	}
	q = a.OK("POST", "/v1/qualifications", map[string]any{"order": order(5000), "customer": map[string]any{"source_id": "q"}})
	if d := q["redeemables"].(map[string]any)["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != small {
		t.Fatalf("qualifications on a small order: %v", q)
	}
	r := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": bigID}},
		"order": order(20000)})
	if stacktest.Num(r["order"].(map[string]any)["total_discount_amount"]) != 4000 {
		t.Fatalf("redemption: %v", r)
	}
	if g := a.OK("GET", "/v1/promotions/tiers/"+bigID, nil); stacktest.Num(g["summary"].(map[string]any)["redemptions"].(map[string]any)["total_redeemed"]) != 1 {
		t.Fatalf("summary: %v", g["summary"])
	}
	// A disabled campaign's tiers are refused.
	a.OK("POST", "/v1/campaigns/"+c["id"].(string)+"/disable", nil)
	v = a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": small}},
		"order": order(5000)})
	if v["valid"] != false {
		t.Fatalf("tier of a disabled campaign: %v", v)
	}
}

// Requests of versions before v2018-08-01 get tiers with conditions, not
// validation_rule_assignments.
func TestTiersBefore20180801HaveConditions(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "r", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{1}}}, "logic": "1"}})
	tr := tier("Old", map[string]any{"type": "AMOUNT", "amount_off": 1})
	tr["validation_rules"] = []any{rule["id"]}
	c := promotion(a, "Versions", tr)
	tid := c["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"].(string)
	for _, path := range []string{"/v1/promotions/tiers/" + tid, "/v1/promotions/" + c["id"].(string) + "/tiers"} {
		h := a.P.Header()
		h.Set("X-Voucherify-API-Version", "v2017-04-20")
		r := stacktest.Do(t, a.E.Client, "GET", stacktest.URL(a.P.Cluster, path), h, nil)
		m := r.JSON(t)
		if tiers, ok := m["tiers"].([]any); ok {
			m = tiers[0].(map[string]any)
		}
		cond, _ := m["conditions"].(map[string]any)
		if r.Status != 200 || m["validation_rule_assignments"] != nil || cond == nil || cond["validation_rules"].([]any)[0] != rule["id"] {
			t.Fatalf("%s before v2018-08-01: %d %v", path, r.Status, m)
		}
	}
	if g := a.OK("GET", "/v1/promotions/tiers/"+tid, nil); g["conditions"] != nil || g["validation_rule_assignments"] == nil {
		t.Fatalf("newest version: %v", g)
	}
}

// A promotion stack, sent alone, validates and redeems as its tiers in
// the stack's order: the percent of the full amount first, then the
// amount off; with another redeemable it is refused, and an unknown
// stack is 404.
func TestPromotionStackAsARedeemable(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	c := promotion(a, "Stacked", tier("Amount", map[string]any{"type": "AMOUNT", "amount_off": 100}),
		tier("Percent", map[string]any{"type": "PERCENT", "percent_off": 10}))
	id := c["id"].(string)
	ts := c["promotion"].(map[string]any)["tiers"].([]any)
	amount, percent := ts[0].(map[string]any)["id"], ts[1].(map[string]any)["id"]
	st := a.OK("POST", "/v1/promotions/"+id+"/stacks", map[string]any{"name": "Percent then amount",
		"tiers": map[string]any{"ids": []any{percent, amount}}})
	body := map[string]any{"redeemables": []any{map[string]any{"object": "promotion_stack", "id": st["id"]}},
		"order": map[string]any{"amount": 10000}, "customer": map[string]any{"source_id": "stacker"}}
	v := a.OK("POST", "/v1/validations", body)
	rs := v["redeemables"].([]any)
	if v["valid"] != true || len(rs) != 2 || rs[0].(map[string]any)["id"] != percent || rs[1].(map[string]any)["id"] != amount ||
		stacktest.Num(v["order"].(map[string]any)["total_discount_amount"]) != 1100 {
		t.Fatalf("validation of the stack: %v", v)
	}
	r := a.OK("POST", "/v1/redemptions", body)
	if len(r["redemptions"].([]any)) != 2 || stacktest.Num(r["order"].(map[string]any)["total_discount_amount"]) != 1100 {
		t.Fatalf("redemption of the stack: %v", r)
	}
	a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_stack", "id": st["id"]},
		map[string]any{"object": "promotion_tier", "id": amount}}, "order": map[string]any{"amount": 10000}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_stack", "id": "stack_none"}},
		"order": map[string]any{"amount": 10000}}, 404, "not_found")
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.Fails("POST", "/v1/validations", body, 404, "not_found")
	// Its tiers count against the stacking rules' redeemables limit.
	mgmt := func(method, path string, body any) stacktest.Resp {
		r := a.E.Do(t, method, "http://api.localhost/management/v1/projects/"+a.P.ID+"/stacking-rules"+path, a.E.MgmtHeader(), body)
		if r.Status != 200 && r.Status != 204 {
			t.Fatalf("rules: %d %s", r.Status, r.Body)
		}
		return r
	}
	rules := mgmt("POST", "", map[string]any{"redeemables_limit": 1, "applicable_redeemables_limit": 1}).JSON(t)
	stacktest.Eventually(t, 10*time.Second, "the limit of one", func() bool {
		r := a.Do("POST", "/v1/validations", body)
		return r.Status == 400 && r.JSON(t)["key"] == "invalid_payload"
	})
	mgmt("DELETE", "/"+rules["id"].(string), nil)
	stacktest.Eventually(t, 10*time.Second, "the default limits", func() bool { return a.Do("POST", "/v1/validations", body).Status == 200 })
	// A deleted tier leaves the stack: the other still applies.
	if r := a.Do("DELETE", "/v1/promotions/tiers/"+amount.(string), nil); r.Status != 204 {
		t.Fatalf("delete tier: %d %s", r.Status, r.Body)
	}
	v = a.OK("POST", "/v1/validations", body)
	if v["valid"] != true || len(v["redeemables"].([]any)) != 1 || stacktest.Num(v["order"].(map[string]any)["total_discount_amount"]) != 1000 {
		t.Fatalf("the stack after a tier's deletion: %v", v)
	}
}
