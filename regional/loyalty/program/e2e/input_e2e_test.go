package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A number outside float64 in any property stored as free-form JSON is a 400
// naming it, and the resource's list still reads: before, 1e400 was stored
// and every later read of the object and its whole list answered 500.
func TestNumbersOutOfRangeAreRefusedAndListsStillRead(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Numbers", nil)["id"].(string)
	code := a.Member(campID, "nina")["code"].(string)
	_ = code
	const huge = "1e400"
	for _, c := range []struct{ method, path, body, field, list string }{
		{"POST", "/v1/customers", `{"source_id":"c1","metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/customers"},
		{"POST", "/v1/orders", `{"source_id":"o1","amount":100,"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/orders"},
		{"POST", "/v1/orders", `{"source_id":"o2","items":[{"quantity":1,"price":10,"product":{"metadata":{"w":-` + huge + `}}}]}`, "items[0].product.metadata.w", "/v1/orders"},
		{"POST", "/v1/rewards", `{"name":"R","parameters":{"product":{"id":"p"}},"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/rewards"},
		{"POST", "/v1/loyalties", `{"name":"C2","vouchers_count":1,"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/loyalties"},
		{"PUT", "/v1/loyalties/" + campID, `{"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/loyalties"},
		{"POST", "/v1/loyalties/" + campID + "/members", `{"customer":{"source_id":"m2"},"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/loyalties/" + campID + "/members"},
		{"POST", "/v1/loyalties/" + campID + "/earning-rules", `[{"event":"order.paid","loyalty":{"type":"FIXED","points":1},"metadata":{"n":` + huge + `}}]`, "[0].metadata.n", "/v1/loyalties/" + campID + "/earning-rules"},
		{"POST", "/v1/loyalties/" + campID + "/tiers", `[{"name":"T","points":{"from":0},"metadata":{"n":` + huge + `}}]`, "[0].metadata.n", "/v1/loyalties/" + campID + "/tiers"},
		{"POST", "/v1/loyalties/members/" + code + "/balance", `{"points":5,"metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/loyalties/members/" + code + "/transactions"},
		{"POST", "/v1/products", `{"name":"P","metadata":{"n":` + huge + `}}`, "metadata.n", "/v1/products"},
	} {
		r := a.Do(c.method, c.path, []byte(c.body))
		m := map[string]any{}
		_ = json.Unmarshal(r.Body, &m)
		if d, _ := m["details"].(string); r.Status != 400 || !strings.Contains(d, "Property "+c.field+" ") {
			t.Errorf("%s %s: %d %s; want 400 naming %s", c.method, c.path, r.Status, r.Body, c.field)
		}
		if r := a.Do("GET", c.list, nil); r.Status != 200 {
			t.Errorf("GET %s after: %d %s", c.list, r.Status, r.Body)
		}
	}
}

// Every id a request names is looked up within the project: another
// project's tier or customer is 404 naming it, as if it did not exist.
func TestAnotherProjectsIDsAreNotFound(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	b := api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
	bCamp := b.Campaign("Theirs", nil)["id"].(string)
	var bTiers []map[string]any
	if r := b.Do("POST", "/v1/loyalties/"+bCamp+"/tiers", []map[string]any{{"name": "Gold", "points": map[string]any{"from": 0}}}); r.Status != 200 || json.Unmarshal(r.Body, &bTiers) != nil {
		t.Fatalf("their tier: %d %s", r.Status, r.Body)
	}
	theirTier := bTiers[0]["id"].(string)
	theirCustomer := b.OK("POST", "/v1/customers", map[string]any{"source_id": "theirs"})["id"].(string)

	camp := a.Campaign("Ours", nil)["id"].(string)
	rule := []map[string]any{{"event": "order.paid", "loyalty_tier": map[string]any{"id": theirTier},
		"loyalty": map[string]any{"type": "FIXED", "points": 10}}}
	if m := a.Fails("POST", "/v1/loyalties/"+camp+"/earning-rules", rule, 404, "not_found"); !strings.Contains(m["details"].(string), theirTier) {
		t.Errorf("the 404 does not name the tier: %v", m)
	}
	if r := a.Do("GET", "/v1/loyalties/"+camp+"/earning-rules", nil); r.Status != 200 || strings.Contains(string(r.Body), theirTier) {
		t.Errorf("rules after: %d %s", r.Status, r.Body)
	}
	var ours []map[string]any
	if r := a.Do("POST", "/v1/loyalties/"+camp+"/tiers", []map[string]any{{"name": "Gold", "points": map[string]any{"from": 0}}}); r.Status != 200 || json.Unmarshal(r.Body, &ours) != nil {
		t.Fatalf("our tier: %d %s", r.Status, r.Body)
	}
	for _, tier := range []any{ours[0]["id"], "__ANY__"} {
		rule[0]["loyalty_tier"] = map[string]any{"id": tier}
		if r := a.Do("POST", "/v1/loyalties/"+camp+"/earning-rules", rule); r.Status != 200 {
			t.Errorf("a rule with tier %v: %d %s", tier, r.Status, r.Body)
		}
	}

	if m := a.Fails("POST", "/v1/orders", map[string]any{"source_id": "o1", "amount": 100, "referrer_id": theirCustomer}, 404, "not_found"); !strings.Contains(m["details"].(string), theirCustomer) {
		t.Errorf("the 404 does not name the referrer: %v", m)
	}
	mine := a.OK("POST", "/v1/customers", map[string]any{"source_id": "mine"})["id"].(string)
	o := a.OK("POST", "/v1/orders", map[string]any{"source_id": "o1", "amount": 100, "referrer_id": "mine"})
	if o["referrer_id"] != mine {
		t.Errorf("referrer by source id: %v", o)
	}
}
