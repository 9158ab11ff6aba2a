package validation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/validation"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// ruleBody is a rule in the reference's shape, its keys deliberately out of
// alphabetical order and a number written with a fraction, to see it read
// back exactly as sent.
const ruleBody = `{"name":"Santorini orders over 50","rules":{"2":{"name":"order.metadata","property":"location","rules":{},` +
	`"conditions":{"$is":["Santorini"]},"error":{"message":"Santorini <shops> & only."}},"1":{"name":"order.amount",` +
	`"conditions":{"$more_than":[5000]}},"3":{"name":"order.items.any","conditions":{"$is":[{"object":"product","id":"prod_hat",` +
	`"effect":"APPLY_TO_EVERY","source_id":null}]},"rules":{"1":{"name":"order.items.metadata","property":"weight",` +
	`"conditions":{"$less_than":[1.50]}}}},"logic":"1 and (2 or 3)"},"error":{"message":"Your order does not qualify."},` +
	`"applicable_to":{"included_all":false,"excluded":[{"object":"product","id":"prod_gift","source_id":"gift","effect":"APPLY_TO_EVERY"}],` +
	`"included":[{"object":"products_collection","id":"pc_summer","source_id":null,"effect":"APPLY_TO_EVERY","quantity_limit":5}]},` +
	`"type":"advanced","context_type":"voucher.discount_voucher"}`

// field is the raw JSON of a property of an answer.
func field(t *testing.T, body []byte, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return string(m[key])
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestValidationRulesCRUD(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	r := a.Do("POST", "/v1/validation-rules", ruleBody)
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ruleBody), &sent); err != nil {
		t.Fatal(err)
	}
	// Stored as given, echoed exactly: order of keys, null members, 1.50.
	for _, k := range []string{"rules", "error", "applicable_to"} {
		if got, want := field(t, r.Body, k), compact(t, string(sent[k])); got != want {
			t.Fatalf("%s read back as\n%s\nwant\n%s", k, got, want)
		}
	}
	v := r.JSON(t)
	id, _ := v["id"].(string)
	if !strings.HasPrefix(id, "val_") || v["object"] != "validation_rules" || v["name"] != "Santorini orders over 50" ||
		v["type"] != "advanced" || v["context_type"] != "voucher.discount_voucher" || v["assignments_count"] != 0.0 ||
		v["created_at"] == nil || v["updated_at"] != nil || field(t, r.Body, "bundle_rules") != `{}` {
		t.Fatalf("created: %s", r.Body)
	}
	if g := a.Do("GET", "/v1/validation-rules/"+id, nil); g.Status != 200 || !bytes.Equal(g.Body, r.Body) {
		t.Fatalf("get: %d %s\nwant %s", g.Status, g.Body, r.Body)
	}

	// Defaults for what a request leaves out.
	d := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Bare"})
	if d["type"] != "expression" || d["context_type"] != "global" || d["error"] != nil ||
		d["applicable_to"].(map[string]any)["included_all"] != false || len(d["rules"].(map[string]any)) != 0 {
		t.Fatalf("defaults: %v", d)
	}
	a.Fails("POST", "/v1/validation-rules", map[string]any{"name": "Bare"}, 409, "duplicate_found")

	// PUT changes what it names; null clears the error; the rest stays.
	u := a.OK("PUT", "/v1/validation-rules/"+id, map[string]any{"name": "Big orders", "error": nil,
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []int{9000}}}, "logic": "1"}})
	if u["name"] != "Big orders" || u["error"] != nil || u["updated_at"] == nil || u["type"] != "advanced" ||
		u["rules"].(map[string]any)["logic"] != "1" || u["applicable_to"].(map[string]any)["excluded"].([]any)[0].(map[string]any)["id"] != "prod_gift" {
		t.Fatalf("updated: %v", u)
	}
	a.Fails("PUT", "/v1/validation-rules/"+id, map[string]any{"name": "Bare"}, 409, "duplicate_found")
	a.Fails("PUT", "/v1/validation-rules/val_missing", map[string]any{"name": "x"}, 404, "not_found")

	// The list: the reference's page and limit (later pages by cursor), order, total.
	a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Another"})
	l := a.OK("GET", "/v1/validation-rules?order=name&limit=2", nil)
	data := l["data"].([]any)
	if l["object"] != "list" || l["data_ref"] != "data" || l["total"] != 3.0 || len(data) != 2 || l["has_more"] != true ||
		data[0].(map[string]any)["name"] != "Another" || data[1].(map[string]any)["name"] != "Bare" {
		t.Fatalf("list by name: %v", l)
	}
	l = a.OK("GET", "/v1/validation-rules?order=name&limit=2&starting_after_id="+l["more_starting_after"].(string), nil)
	if data := l["data"].([]any); len(data) != 1 || data[0].(map[string]any)["name"] != "Big orders" || l["has_more"] != false {
		t.Fatalf("second page: %v", l)
	}
	if l := a.OK("GET", "/v1/validation-rules?order=-created_at&page=1&limit=1", nil); l["data"].([]any)[0].(map[string]any)["name"] != "Another" {
		t.Fatalf("newest first: %v", l)
	}
	if l := a.OK("GET", "/v1/validation-rules?start_date=2999-01-01T00:00:00Z", nil); l["total"] != 0.0 {
		t.Fatalf("start_date: %v", l)
	}
	a.Fails("GET", "/v1/validation-rules?page=101", nil, 400, "page_over_limit")
	a.Fails("GET", "/v1/validation-rules?order=bogus", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/validation-rules?end_date=yesterday", nil, 400, "invalid_query_params")

	// DELETE: 204, then 404, its assignments gone with it.
	a.OK("POST", "/v1/validation-rules/"+id+"/assignments", map[string]any{"related_object_type": "campaign", "related_object_id": "camp_1"})
	if r := a.Do("DELETE", "/v1/validation-rules/"+id, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/validation-rules/"+id, nil, 404, "not_found")
	a.Fails("DELETE", "/v1/validation-rules/"+id, nil, 404, "not_found")
	if l := a.OK("GET", "/v1/validation-rules-assignments?related_object_id=camp_1", nil); l["total"] != 0.0 {
		t.Fatalf("assignments of a deleted rule: %v", l)
	}
}

// A rule that does not compile is a 400 that names where and what.
func TestValidationRulesRefusedNamingTheProblem(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	cond := func(name, conds string) string { return `{"name":"` + name + `","conditions":` + conds + `}` }
	for _, r := range []struct{ body, want string }{
		{`{"rules":{}}`, "name is required"},
		{`{"name":"r","rules":{"1":` + cond("order.total", `{"$is":[1]}`) + `}}`, `rules.1.name: unknown rule name "order.total"`},
		{`{"name":"r","rules":{"1":` + cond("order.amount", `{"$about":[1]}`) + `}}`, `rules.1.conditions.$about: unknown condition $about`},
		{`{"name":"r","rules":{"1":` + cond("order.amount", `{"$is":[1]}`) + `,"logic":"1 or 2"}}`, `rules.logic: names condition 2`},
		{`{"name":"r","rules":{"1":` + cond("order.amount", `{"$is":[1]}`) + `,"logic":"(1"}}`, `rules.logic: the ( at character 1 is not closed`},
		{`{"name":"r","rules":{"1":` + cond("order.amount", `{"$more_than":["50"]}`) + `}}`, `rules.1.conditions.$more_than[0]: must be a whole number`},
		{`{"name":"r","rules":{"1":` + cond("customer.segment", `{"$is":[{"id":"seg"}]}`) + `}}`, `rules.1.conditions.$is[0]: must be a string`},
		{`{"name":"r","rules":{"1":{"name":"order.items.every","conditions":{"$is":[{"object":"product","id":"p"}]},"rules":{"1":` +
			cond("order.items.quantity", `{"$starts_with":["1"]}`) + `}}}}`, `rules.1.rules.1.conditions.$starts_with: order.items.quantity does not take $starts_with`},
		{`{"name":"r","rules":[]}`, "rules must be an object or null"},
		{`{"name":"r","type":"simple"}`, `type must be one of expression, basic, advanced, complex; got "simple"`},
		{`{"name":"r","context_type":"anywhere"}`, `context_type must be one of`},
		{`{"name":"r","applicable_to":{"included":[{"object":"product","id":"p","effect":"APPLY_TWICE"}]}}`, `applicable_to.included[0].effect: must be one of`},
	} {
		e := a.Fails("POST", "/v1/validation-rules", r.body, 400, "invalid_payload")
		if d, _ := e["details"].(string); !strings.Contains(d, r.want) {
			t.Errorf("%s: details %q, want %q", r.body, d, r.want)
		}
	}
	id := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "ok"})["id"].(string)
	e := a.Fails("PUT", "/v1/validation-rules/"+id, `{"rules":{"1":{"name":"order.amount","conditions":{"$is":["x"]}}}}`, 400, "invalid_payload")
	if !strings.Contains(e["details"].(string), `rules.1.conditions.$is[0]`) {
		t.Fatalf("update refused: %v", e)
	}
	if g := a.OK("GET", "/v1/validation-rules/"+id, nil); len(g["rules"].(map[string]any)) != 0 {
		t.Fatalf("a refused update changed the rule: %v", g)
	}
}

func TestValidationRuleAssignments(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "r1"})["id"].(string)
	rule2 := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "r2"})["id"].(string)
	base := "/v1/validation-rules/" + rule + "/assignments"

	camp := a.OK("POST", base, map[string]any{"related_object_type": "campaign", "related_object_id": "camp_1"})
	if !strings.HasPrefix(camp["id"].(string), "asgm_") || camp["rule_id"] != rule || camp["related_object_type"] != "campaign" ||
		camp["related_object_id"] != "camp_1" || camp["object"] != "validation_rules_assignment" || camp["created_at"] == nil {
		t.Fatalf("assignment: %v", camp)
	}
	// Types not served yet are kept by id as given; voucher is the default
	// type; the older {"voucher": …} form works too.
	tier := a.OK("POST", base, map[string]any{"related_object_type": "promotion_tier", "related_object_id": "promo_1"})
	if v := a.OK("POST", base, map[string]any{"related_object_id": "v_1"}); v["related_object_type"] != "voucher" {
		t.Fatalf("default type: %v", v)
	}
	if v := a.OK("POST", base, map[string]any{"earning_rule": "ern_1"}); v["related_object_type"] != "earning_rule" || v["related_object_id"] != "ern_1" {
		t.Fatalf("older form: %v", v)
	}
	a.OK("POST", "/v1/validation-rules/"+rule2+"/assignments", map[string]any{"related_object_type": "campaign", "related_object_id": "camp_1"})

	// The same object twice is 409; force replaces the assignment.
	a.Fails("POST", base, map[string]any{"related_object_type": "campaign", "related_object_id": "camp_1"}, 409, "duplicate_found")
	again := a.OK("POST", base+"?force=true", map[string]any{"related_object_type": "campaign", "related_object_id": "camp_1"})
	if again["id"] == camp["id"] {
		t.Fatalf("force kept the assignment: %v", again)
	}
	a.Fails("POST", base+"?force=maybe", map[string]any{"related_object_id": "camp_1"}, 400, "invalid_query_params")
	a.Fails("POST", base, map[string]any{"related_object_type": "reward", "related_object_id": "rew_1"}, 400, "invalid_payload")
	a.Fails("POST", base, map[string]any{"related_object_type": "campaign"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/validation-rules/val_missing/assignments", map[string]any{"related_object_id": "v_1"}, 404, "not_found")

	l := a.OK("GET", base+"?limit=2", nil)
	if l["total"] != 4.0 || len(l["data"].([]any)) != 2 || l["has_more"] != true {
		t.Fatalf("rule's assignments: %v", l)
	}
	if g := a.OK("GET", "/v1/validation-rules/"+rule, nil); g["assignments_count"] != 4.0 {
		t.Fatalf("assignments_count: %v", g)
	}
	l = a.OK("GET", "/v1/validation-rules-assignments?related_object_id=camp_1", nil)
	if l["total"] != 2.0 {
		t.Fatalf("assignments of camp_1: %v", l)
	}
	if l := a.OK("GET", "/v1/validation-rules-assignments?related_object_id=camp_1&rule="+rule2, nil); l["total"] != 1.0 ||
		l["data"].([]any)[0].(map[string]any)["rule_id"] != rule2 {
		t.Fatalf("assignments of camp_1 by r2: %v", l)
	}
	if l := a.OK("GET", "/v1/validation-rules-assignments?order=-created_at", nil); l["total"] != 5.0 ||
		l["data"].([]any)[0].(map[string]any)["id"] != again["id"] {
		t.Fatalf("all assignments, newest first: %v", l)
	}

	// RulesOf: what the engine asks of an object.
	svc := validation.NewService(a.E.Stack.Regional["api"].Pool(), a.E.Clock, nil, nil)
	ids, err := svc.RulesOf(context.Background(), a.P.ID, "camp_1")
	if err != nil || len(ids) != 2 || ids[0] != rule2 || ids[1] != rule {
		t.Fatalf("RulesOf camp_1: %v %v", ids, err)
	}

	// Another project sees none of it.
	other.Fails("GET", "/v1/validation-rules/"+rule, nil, 404, "not_found")
	other.Fails("PUT", "/v1/validation-rules/"+rule, map[string]any{"name": "mine"}, 404, "not_found")
	other.Fails("DELETE", "/v1/validation-rules/"+rule, nil, 404, "not_found")
	other.Fails("GET", base, nil, 404, "not_found")
	other.Fails("POST", base, map[string]any{"related_object_id": "v_1"}, 404, "not_found")
	other.Fails("DELETE", base+"/"+tier["id"].(string), nil, 404, "not_found")
	if l := other.OK("GET", "/v1/validation-rules-assignments?related_object_id=camp_1", nil); l["total"] != 0.0 {
		t.Fatalf("another project's assignments: %v", l)
	}
	if l := other.OK("GET", "/v1/validation-rules", nil); l["total"] != 0.0 {
		t.Fatalf("another project's rules: %v", l)
	}
	if ids, err := svc.RulesOf(context.Background(), other.P.ID, "camp_1"); err != nil || len(ids) != 0 {
		t.Fatalf("RulesOf in another project: %v %v", ids, err)
	}

	// An assignment is deleted through its own rule only.
	a.Fails("DELETE", "/v1/validation-rules/"+rule2+"/assignments/"+tier["id"].(string), nil, 404, "not_found")
	if r := a.Do("DELETE", base+"/"+tier["id"].(string), nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete assignment: %d %s", r.Status, r.Body)
	}
	a.Fails("DELETE", base+"/"+tier["id"].(string), nil, 404, "not_found")
	if g := a.OK("GET", "/v1/validation-rules/"+rule, nil); g["assignments_count"] != 3.0 {
		t.Fatalf("assignments_count after a delete: %v", g)
	}
}

// A rule is compiled once per version: an instance that compiled a rule
// evaluates the new version after another instance changed it, and does
// not compile an unchanged rule again.
func TestEvaluateSeesTheRulesNewVersion(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	id := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Over 50", "error": map[string]any{"message": "Spend more than 50."},
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []int{5000}}}, "logic": "1"}})["id"].(string)
	// Another regional instance over the same database.
	svc := validation.NewService(a.E.Stack.Regional["api"].Pool(), a.E.Clock, nil, nil)
	amount := int64(6000)
	in := rules.Input{Order: &rules.Order{Amount: &amount}}
	for range 3 {
		v, err := svc.Evaluate(ctx, a.P.ID, id, in)
		if err != nil || !v.Valid || v.Error != nil {
			t.Fatalf("6000 against more than 5000: %+v %v", v, err)
		}
	}
	if n := svc.Recompiles(); n != 1 {
		t.Fatalf("compiled %d times for one version, want 1", n)
	}

	a.OK("PUT", "/v1/validation-rules/"+id, map[string]any{"rules": map[string]any{"1": map[string]any{"name": "order.amount",
		"conditions": map[string]any{"$more_than": []int{7000}}, "error": map[string]any{"message": "Spend more than 70."}}, "logic": "1"}})
	for range 2 {
		v, err := svc.Evaluate(ctx, a.P.ID, id, in)
		if err != nil || v.Valid || v.Error == nil || v.Error.Message != "Spend more than 70." || v.Error.RuleID != id || v.Error.Condition != "1" {
			t.Fatalf("6000 against the updated rule: %+v %+v %v", v, v.Error, err)
		}
	}
	if n := svc.Recompiles(); n != 2 {
		t.Fatalf("compiled %d times for two versions, want 2", n)
	}
	// Only the rule-level message is changed: a new version too.
	a.OK("PUT", "/v1/validation-rules/"+id, map[string]any{"rules": map[string]any{"1": map[string]any{"name": "order.amount",
		"conditions": map[string]any{"$more_than": []int{7000}}}}, "error": map[string]any{"message": "Not yet."}})
	if v, err := svc.Evaluate(ctx, a.P.ID, id, in); err != nil || v.Error == nil || v.Error.Message != "Not yet." {
		t.Fatalf("after the message changed: %+v %v", v, err)
	}

	// Several rules at once, in the order asked.
	id2 := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Anyone",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$has_value": []any{}}}}})["id"].(string)
	vs, err := svc.EvaluateAll(ctx, a.P.ID, []string{id2, id}, in)
	if err != nil || len(vs) != 2 || !vs[0].Valid || vs[1].Valid {
		t.Fatalf("EvaluateAll: %+v %v", vs, err)
	}

	// A deleted rule, or another project's, is 404.
	other := a.E.CreateProject(t, "api")
	for _, c := range []struct{ project, rule string }{{other.ID, id}, {a.P.ID, "val_missing"}} {
		_, err := svc.Evaluate(ctx, c.project, c.rule, in)
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Status != 404 || ae.ResourceType != "validation_rule" {
			t.Fatalf("Evaluate %s in %s: %v", c.rule, c.project, err)
		}
	}
	if r := a.Do("DELETE", "/v1/validation-rules/"+id, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if _, err := svc.Evaluate(ctx, a.P.ID, id, in); err == nil {
		t.Fatal("a deleted rule evaluated")
	}
}

// The review's leftovers, end to end: $in: [] and conditions: {} are
// written and read back as sent, and evaluated (an empty $in matches
// nothing, empty conditions hold); an order amount of 0 is the amount,
// not the items' sum; a line's price × quantity out of range is a 400.
func TestEmptyConditionsZeroAmountsAndOverflow(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	voucher := a.OK("POST", "/v1/vouchers/RULED", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}})
	body := `{"name":"Free orders","rules":{"1":{"name":"order.amount","conditions":{"$less_than":[1]},` +
		`"error":{"message":"Free orders only."}},"2":{"name":"customer.id","conditions":{"$not_in":[]}},` +
		`"3":{"name":"order.metadata","property":"x","conditions":{}},"logic":"1 and 2 and 3"}}`
	r := a.Do("POST", "/v1/validation-rules", json.RawMessage(body))
	if r.Status != http.StatusOK || field(t, r.Body, "rules") != field(t, []byte(body), "rules") {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	rule := field(t, r.Body, "id")
	a.OK("POST", "/v1/validation-rules/"+strings.Trim(rule, `"`)+"/assignments",
		map[string]any{"related_object_type": "voucher", "related_object_id": voucher["id"]})
	validate := func(order map[string]any) map[string]any {
		return a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "RULED"}},
			"order": order})
	}
	items := []any{map[string]any{"product_id": "prod_1", "price": 5000, "quantity": 2}}
	if v := validate(map[string]any{"amount": 0, "items": items}); v["valid"] != true {
		t.Fatalf("an amount of 0 given: %v", v)
	}
	v := validate(map[string]any{"items": items})
	if e := v["inapplicable_redeemables"].([]any)[0].(map[string]any)["result"].(map[string]any)["error"].(map[string]any); v["valid"] != false ||
		e["details"] != "Free orders only." {
		t.Fatalf("no amount: the items' sum, 10000: %v", v)
	}
	// An empty $in is equal to nothing.
	a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Nobody",
		"rules": map[string]any{"1": map[string]any{"name": "customer.id", "conditions": map[string]any{"$in": []any{}}}}})
	for _, bad := range []map[string]any{
		{"items": []any{map[string]any{"product_id": "p", "price": 1e15, "quantity": 1e15}}},
		{"items": []any{map[string]any{"product_id": "p", "price": 1e15, "quantity": 10000}}}, // past int64: it wrapped
	} {
		if e := a.Fails("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "RULED"}},
			"order": bad}, http.StatusBadRequest, "invalid_payload"); !strings.Contains(e["details"].(string), "items[0]") {
			t.Fatalf("overflow: %v", e)
		}
	}
}
