package qualifications_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/qualifications"
)

// screenRules are the rules of the mixed catalogue: every form the tiers'
// index keys by, and forms it leaves to full evaluation.
func screenRules(gold, friends string) []map[string]any {
	c := func(name string, conds map[string]any) map[string]any {
		return map[string]any{"name": name, "conditions": conds}
	}
	one := func(cd map[string]any) map[string]any { return map[string]any{"1": cd, "logic": "1"} }
	return []map[string]any{
		one(c("order.amount", map[string]any{"$more_than": []any{5000}})),
		one(c("order.amount", map[string]any{"$more_than_or_equal": []any{20000}})),
		one(c("order.amount", map[string]any{"$less_than": []any{3000}})),
		one(c("order.metadata.channel", map[string]any{"$is": []any{"web"}})),
		one(c("order.metadata.channel", map[string]any{"$in": []any{"shop", "app"}})),
		one(c("order.metadata.channel", map[string]any{"$is_not": []any{"web"}})),
		one(c("customer.segment", map[string]any{"$in": []any{gold}})),
		one(c("customer.segment", map[string]any{"$is": []any{friends}})),
		one(c("customer.metadata.tier", map[string]any{"$is": []any{"silver"}})),
		one(c("order.items.any", map[string]any{"$in": []any{map[string]any{"object": "product", "id": "prod_0"}}})),
		one(c("order.items.any", map[string]any{"$is": []any{map[string]any{"object": "sku", "source_id": "sku-1"}}})),
		one(c("date", map[string]any{"$after": []any{"2020-01-01T00:00:00Z"}})),
		one(c("date", map[string]any{"$after": []any{"2999-01-01T00:00:00Z"}})),
		one(c("redemption.count.per_customer", map[string]any{"$less_than": []any{2}})),
		{"1": c("order.amount", map[string]any{"$more_than": []any{1000}}), "2": c("order.metadata.channel", map[string]any{"$is": []any{"app"}}),
			"3": c("customer.segment", map[string]any{"$in": []any{gold}}), "logic": "1 and (2 or 3)"},
		{"1": c("order.metadata.channel", map[string]any{"$is": []any{"shop"}}), "2": c("customer.metadata.tier", map[string]any{"$is": []any{"gold"}}),
			"logic": "1 or 2"},
	}
}

// newScreenCatalogue makes customers in segments and two PROMOTION
// campaigns of tiers with random rules (one campaign ruled itself), and
// returns the rules' ids.
func newScreenCatalogue(t *testing.T, a stacktest.API, r *rand.Rand, tiers int) {
	t.Helper()
	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})["id"].(string)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"tier": "gold"}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "metadata": map[string]any{"tier": "silver"}})
	friends := a.OK("POST", "/v1/segments", map[string]any{"name": "Friends", "type": "static", "customers": []any{"bob"}})["id"].(string)
	var ruleIDs []string
	for i, rs := range screenRules(gold, friends) {
		ruleIDs = append(ruleIDs, a.OK("POST", "/v1/validation-rules", map[string]any{"name": fmt.Sprintf("r%d", i), "type": "advanced",
			"rules": rs})["id"].(string))
	}
	for k, name := range []string{"Promo", "Ruled promo"} {
		var ts []any
		for i := 0; i < tiers/2; i++ {
			tier := map[string]any{"name": fmt.Sprintf("%s %d", name, i), "action": map[string]any{"discount": map[string]any{
				"type": "AMOUNT", "amount_off": 10 + r.Intn(400), "effect": "APPLY_TO_ORDER"}}}
			var vr []any
			for _, k := range r.Perm(len(ruleIDs))[:r.Intn(4)/2+r.Intn(2)] {
				vr = append(vr, ruleIDs[k])
			}
			if len(vr) > 0 {
				tier["validation_rules"] = vr
			}
			ts = append(ts, tier)
		}
		c := a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": ts}})
		if k == 1 {
			a.OK("POST", "/v1/validation-rules/"+ruleIDs[0]+"/assignments", map[string]any{"related_object_type": "campaign",
				"related_object_id": c["id"]})
		}
	}
}

// randomQualification is a request of a random scenario, customer, order
// and options.
func randomQualification(r *rand.Rand) map[string]any {
	body := map[string]any{"scenario": []string{"ALL", "AUDIENCE_ONLY", "PRODUCTS", "PRODUCTS_DISCOUNT_BY_CUSTOMER",
		"PROMOTION_STACKS", "ALL"}[r.Intn(6)]}
	if c := []string{"ann", "bob", "carl", ""}[r.Intn(4)]; c != "" {
		body["customer"] = map[string]any{"source_id": c}
	}
	items := []any{}
	for i := 1 + r.Intn(3); i > 0; i-- {
		it := map[string]any{"quantity": 1 + r.Intn(3), "price": 500 * (1 + r.Intn(20))}
		if r.Intn(2) == 0 {
			it["product_id"] = fmt.Sprintf("prod_%d", r.Intn(3))
		} else {
			it["source_id"], it["related_object"] = fmt.Sprintf("sku-%d", r.Intn(3)), "sku"
		}
		items = append(items, it)
	}
	order := map[string]any{"items": items}
	if ch := []string{"web", "shop", "app", ""}[r.Intn(4)]; ch != "" {
		order["metadata"] = map[string]any{"channel": ch}
	}
	body["order"] = order
	opts := map[string]any{"limit": 1 + r.Intn(10), "sorting_rule": []string{"DEFAULT", "BEST_DEAL", "LEAST_DEAL"}[r.Intn(3)]}
	body["options"] = opts
	return body
}

// Qualifications screened by the tiers' index answer exactly what judging
// every tier answers (the redeemables, their order, the totals and pages)
// over random requests against a mixed catalogue, and judge fewer tiers.
func TestScreenedQualificationsAnswerAsFullEvaluation(t *testing.T) {
	a := stacktest.NewAPI(t)
	r := rand.New(rand.NewSource(39))
	newScreenCatalogue(t, a, r, 120)
	ask := func(body map[string]any, full bool) (map[string]any, int64) {
		qualifications.FullEvaluation.Store(full)
		defer qualifications.FullEvaluation.Store(false)
		before := qualifications.JudgedTiers.Load()
		resp := a.Do("POST", "/v1/qualifications", body)
		judged := qualifications.JudgedTiers.Load() - before
		if resp.Status != 200 {
			t.Fatalf("%v: %d %s", body, resp.Status, resp.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(resp.Body, &out); err != nil {
			t.Fatal(err)
		}
		delete(out, "id") // each answer's own
		return out, judged
	}
	var screened, full int64
	pages := 0
	for n := 0; n < 60; n++ {
		body := randomQualification(r)
		for page := 0; page < 3; page++ {
			got, js := ask(body, false)
			want, jf := ask(body, true)
			screened, full = screened+js, full+jf
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("request %d %v page %d:\nscreened %s\nfull     %s", n, body, page, g, w)
			}
			pages++
			list := got["redeemables"].(map[string]any)
			if list["has_more"] != true {
				break
			}
			body["options"].(map[string]any)["starting_after"] = list["more_starting_after"]
		}
	}
	t.Logf("%d pages: judged %d tiers screened, %d in full", pages, screened, full)
	if screened*4 > full*3 {
		t.Fatalf("judged %d tiers screened, %d in full: the index prunes too little", screened, full)
	}
}
