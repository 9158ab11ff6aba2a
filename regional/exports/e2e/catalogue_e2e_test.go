package e2e_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// rowsOf runs an export through POST /v1/exports and returns its file.
func rowsOf(a stacktest.API, object string, parameters map[string]any) [][]string {
	a.T.Helper()
	body := map[string]any{"exported_object": object}
	if parameters != nil {
		body["parameters"] = parameters
	}
	e := export(a, "/v1/exports", body)
	if e["exported_object"] != object {
		a.T.Fatalf("exported_object %v, want %s", e["exported_object"], object)
	}
	return file(a, e["result"].(map[string]any)["url"].(string))
}

// Vouchers, redemptions and publications export as the API shows them:
// each discount's value for its type, gift cards and loyalty cards,
// redemptions of every kind with their failures, and one row per voucher
// of a publication of several. Another project's rows stay out.
func TestVouchersRedemptionsAndPublicationsExport(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.OK("POST", "/v1/vouchers/THEIRS", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}})

	a.OK("POST", "/v1/vouchers/EX-AMOUNT", map[string]any{"type": "DISCOUNT_VOUCHER", "category": "summer",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 1250}, "metadata": map[string]any{"shelf": "A"}})
	a.OK("POST", "/v1/vouchers/EX-PERCENT", map[string]any{"type": "DISCOUNT_VOUCHER", "redemption": map[string]any{"quantity": 1},
		"discount": map[string]any{"type": "PERCENT", "percent_off": 15, "amount_limit": 500}})
	a.OK("POST", "/v1/vouchers/EX-UNIT", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "UNIT", "unit_off": 2, "unit_type": "prod_x", "effect": "ADD_MISSING_ITEMS"}})
	a.OK("POST", "/v1/vouchers/EX-GIFT", map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 5000}})
	a.OK("POST", "/v1/vouchers/EX-BIN", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}})
	if r := a.Do("DELETE", "/v1/vouchers/EX-BIN", nil); r.Status != 204 {
		t.Fatalf("to the bin: %d %s", r.Status, r.Body)
	}
	campID := a.Campaign("Points", nil)["id"].(string)
	card := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 70})

	recs := rowsOf(a, "voucher", map[string]any{"order": "created_at"})
	want := [][]string{{"Code", "Voucher Type", "Value", "Discount Type"}, {"EX-AMOUNT", "DISCOUNT_VOUCHER", "12.50", "AMOUNT"},
		{"EX-PERCENT", "DISCOUNT_VOUCHER", "15", "PERCENT"}, {"EX-UNIT", "DISCOUNT_VOUCHER", "2", "UNIT"},
		{"EX-GIFT", "GIFT_VOUCHER", "50.00", ""}, {card, "LOYALTY_CARD", "70", ""}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("vouchers, default fields:\n%v\nwant\n%v", recs, want)
	}
	recs = rowsOf(a, "voucher", map[string]any{
		"fields":  []string{"code", "category", "discount_amount_limit", "gift_balance", "loyalty_balance", "redemption_quantity", "active", "metadata", "campaign"},
		"filters": map[string]any{"junction": "or", "code": map[string]any{"conditions": map[string]any{"$in": []string{"EX-AMOUNT", "EX-PERCENT"}}}, "voucher_type": map[string]any{"conditions": map[string]any{"$is": "LOYALTY_CARD"}}}})
	want = [][]string{{"Code", "Category", "Discount Amount Limit", "Gift Balance", "Loyalty Balance", "Redemption Quantity", "Active", "Metadata", "Campaign"},
		{"EX-AMOUNT", "summer", "", "", "", "", "true", `{"shelf": "A"}`, ""},
		{"EX-PERCENT", "", "5.00", "", "", "1", "true", "", ""},
		{card, "", "", "", "70", "", "true", "", "Points"}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("vouchers, fields and filters:\n%v\nwant\n%v", recs, want)
	}

	// A figure stored as given but not a number is left empty, not a
	// failed export.
	// (An AMOUNT discount's amount_limit, which only PERCENT reads, is kept as sent.)
	a.OK("POST", "/v1/vouchers/EX-ODD", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100, "amount_limit": "x"}})
	recs = rowsOf(a, "voucher", map[string]any{"fields": []string{"code", "value", "discount_amount_limit"},
		"filters": map[string]any{"code": map[string]any{"conditions": map[string]any{"$is": "EX-ODD"}}}})
	if !reflect.DeepEqual(recs, [][]string{{"Code", "Value", "Discount Amount Limit"}, {"EX-ODD", "1.00", ""}}) {
		t.Fatalf("a voucher with an odd amount_limit: %v", recs)
	}
	if r := a.Do("DELETE", "/v1/vouchers/EX-ODD?force=true", nil); r.Status != 204 {
		t.Fatalf("delete EX-ODD: %d %s", r.Status, r.Body)
	}

	// A formula, a unit discount's effect and the rules assigned to a
	// voucher, in the order they were assigned.
	formula := a.OK("POST", "/v1/vouchers/EX-FORMULA", map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 5, "percent_off_formula": "IF(ORDER_AMOUNT > 100;10;5)"}})
	rule := func(name string) string {
		id := a.OK("POST", "/v1/validation-rules", map[string]any{"name": name, "type": "advanced",
			"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{100}}},
				"logic": "1"}})["id"].(string)
		a.OK("POST", "/v1/validation-rules/"+id+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": formula["id"]})
		return id
	}
	first, second := rule("first"), rule("second")
	recs = rowsOf(a, "voucher", map[string]any{"order": "code", "fields": []string{"code", "formula", "discount_unit_effect", "validation_rules_id"},
		"filters": map[string]any{"code": map[string]any{"conditions": map[string]any{"$in": []string{"EX-FORMULA", "EX-UNIT", "EX-AMOUNT"}}}}})
	want = [][]string{{"Code", "Formula", "Discount Unit Effect", "Validation Rules ID"}, {"EX-AMOUNT", "", "", ""},
		{"EX-FORMULA", "IF(ORDER_AMOUNT > 100;10;5)", "", first + "," + second}, {"EX-UNIT", "", "ADD_MISSING_ITEMS", ""}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("formula, unit effect and rules:\n%v\nwant\n%v", recs, want)
	}
	if r := a.Do("DELETE", "/v1/vouchers/EX-FORMULA?force=true", nil); r.Status != 204 {
		t.Fatalf("delete EX-FORMULA: %d %s", r.Status, r.Body)
	}

	// Redemptions: a stacked one of two (a success each), a refused one
	// (FAILURE), and a card paying for a reward.
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "name": "Bob"})
	ok := a.OK("POST", "/v1/redemptions", map[string]any{"customer": map[string]any{"source_id": "bob"},
		"order": map[string]any{"source_id": "ord-1", "amount": 10000},
		"redeemables": []any{map[string]any{"object": "voucher", "id": "EX-PERCENT"},
			map[string]any{"object": "voucher", "id": "EX-GIFT", "gift": map[string]any{"credits": 1000}}}})
	if r := a.Do("POST", "/v1/redemptions", map[string]any{"customer": map[string]any{"source_id": "bob"},
		"order": map[string]any{"amount": 10000}, "redeemables": []any{map[string]any{"object": "voucher", "id": "EX-PERCENT"}}}); r.Status != 400 {
		t.Fatalf("a second redemption of a code of quantity 1: %d %s", r.Status, r.Body)
	}
	reward := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "type": "MATERIAL", "parameters": map[string]any{"product": map[string]any{"id": a.OK("POST", "/v1/products", map[string]any{"name": "Mug"})["id"]}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", []any{map[string]any{"reward": reward, "parameters": map[string]any{"loyalty": map[string]any{"points": 20}}}})
	a.OK("POST", "/v1/loyalties/members/"+card+"/redemption", map[string]any{"reward": map[string]any{"id": reward}})

	recs = rowsOf(a, "redemption", map[string]any{"order": "created_at",
		"fields": []string{"voucher_code", "customer_source_id", "customer_name", "order_amount", "gift_amount", "loyalty_points", "result", "failure_code"}})
	want = [][]string{{"Voucher Code", "Customer Source ID", "Customer Name", "Order Amount", "Gift Amount", "Loyalty Points", "Result", "Failure Code"},
		{"EX-PERCENT", "bob", "Bob", "100.00", "", "", "SUCCESS", ""},
		{"EX-GIFT", "bob", "Bob", "100.00", "10.00", "", "SUCCESS", ""},
		{"EX-PERCENT", "bob", "Bob", "", "", "", "FAILURE", "quantity_exceeded"},
		{card, "ann", "Member ann", "", "", "20", "SUCCESS", ""}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("redemptions:\n%v\nwant\n%v", recs, want)
	}
	recs = rowsOf(a, "redemption", map[string]any{"filters": map[string]any{"result": map[string]any{"conditions": map[string]any{"$is": "SUCCESS"}},
		"voucher_code": map[string]any{"conditions": map[string]any{"$is": "EX-GIFT"}}}})
	kids := ok["redemptions"].([]any)
	gift := kids[1].(map[string]any)
	if len(recs) != 2 || recs[0][0] != "ID" || recs[1][0] != gift["id"] || recs[1][1] != "redemption" || recs[1][5] != "SUCCESS" {
		t.Fatalf("redemptions, default fields and filters: %v (the gift card's redemption %v)", recs, gift["id"])
	}

	// Publications: one row per voucher of a publication of several.
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Bulk", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC", "vouchers_count": 3,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}})
	if id, isAsync := c["async_action_id"].(string); isAsync {
		a.WaitAction(id)
	}
	a.OK("POST", "/v1/publications", map[string]any{"voucher": "EX-UNIT", "customer": map[string]any{"source_id": "cy"}, "channel": "web"})
	many := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Bulk", "count": 2},
		"customer": map[string]any{"source_id": "dee"}, "metadata": map[string]any{"wave": 1}})
	codes := many["vouchers"].([]any)
	recs = rowsOf(a, "publication", map[string]any{"order": "created_at", "fields": []string{"voucher_code", "customer_source_id", "channel", "campaign", "metadata"}})
	want = [][]string{{"Voucher Code", "Customer Source ID", "Channel", "Campaign", "Metadata"},
		{"EX-UNIT", "cy", "web", "", "{}"},
		{codes[0].(string), "dee", "API", "Bulk", `{"wave": 1}`}, {codes[1].(string), "dee", "API", "Bulk", `{"wave": 1}`}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("publications:\n%v\nwant\n%v", recs, want)
	}
	recs = rowsOf(a, "publication", map[string]any{"filters": map[string]any{"voucher_code": map[string]any{"conditions": map[string]any{"$is": codes[1]}}}})
	if len(recs) != 2 || recs[0][0] != "Voucher Code" || recs[1][0] != codes[1] || recs[1][3] != "API" {
		t.Fatalf("publications, default fields, filtered by a code of several: %v", recs)
	}

	for _, bad := range []map[string]any{
		{"exported_object": "voucher", "parameters": map[string]any{"fields": []string{"qr_code"}}}, // Tally draws no codes

		{"exported_object": "redemption", "parameters": map[string]any{"fields": []string{"code"}}},
		{"exported_object": "publication", "parameters": map[string]any{"filters": map[string]any{"nope": map[string]any{"conditions": map[string]any{"$is": "x"}}}}},
	} {
		if r := a.Do("POST", "/v1/exports", bad); r.Status != 400 || r.JSON(t)["key"] != "invalid_export_params" {
			t.Errorf("%v: %d %s", bad, r.Status, r.Body)
		}
	}
	// The other project's export has its voucher only.
	e := other.OK("POST", "/v1/exports", map[string]any{"exported_object": "voucher"})
	done := waitDone(other, e["id"].(string))
	if recs := file(other, done["result"].(map[string]any)["url"].(string)); !reflect.DeepEqual(recs,
		[][]string{{"Code", "Voucher Type", "Value", "Discount Type"}, {"THEIRS", "DISCOUNT_VOUCHER", "0.01", "AMOUNT"}}) {
		t.Fatalf("another project's vouchers: %v", recs)
	}
}

// Exports sort by every `order` the reference lists for their object, and
// filter on any metadata key (`metadata.<key>`), the key taken as data.
func TestExportsSortByTheReferencesOrdersAndFilterOnMetadata(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	voucher := func(code string, metadata map[string]any) {
		body := map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}
		if metadata != nil {
			body["metadata"] = metadata
		}
		a.OK("POST", "/v1/vouchers/"+code, body)
	}
	voucher("EX-C", map[string]any{"shelf": "B", "rank": 2})
	voucher("EX-A", map[string]any{"shelf": "A", "it's": "q", `x'); SELECT $1 \`: "odd"})
	voucher("EX-B", nil)
	a.E.Clock.Advance(time.Minute)
	a.OK("PUT", "/v1/vouchers/EX-C", map[string]any{"metadata": map[string]any{"shelf": "B", "rank": 2, "seen": true}})

	codes := func(parameters map[string]any) []string {
		t.Helper()
		parameters["fields"] = []string{"code"}
		var out []string
		for _, r := range rowsOf(a, "voucher", parameters)[1:] {
			out = append(out, r[0])
		}
		return out
	}
	for _, c := range []struct {
		order string
		want  []string
	}{
		{"code", []string{"EX-A", "EX-B", "EX-C"}},
		{"-code", []string{"EX-C", "EX-B", "EX-A"}},
		{"created_at", []string{"EX-C", "EX-A", "EX-B"}},
		{"-created_at", []string{"EX-B", "EX-A", "EX-C"}},
		{"-updated_at", []string{"EX-C", "EX-B", "EX-A"}}, // EX-C changed last; the others never changed
	} {
		if got := codes(map[string]any{"order": c.order}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("order %s: %v, want %v", c.order, got, c.want)
		}
	}
	for _, c := range []struct {
		filter map[string]any
		want   []string
	}{
		{map[string]any{"metadata.shelf": map[string]any{"conditions": map[string]any{"$is": "A"}}}, []string{"EX-A"}},
		{map[string]any{"metadata.rank": map[string]any{"conditions": map[string]any{"$is": 2}}}, []string{"EX-C"}},
		{map[string]any{"metadata.it's": map[string]any{"conditions": map[string]any{"$is": "q"}}}, []string{"EX-A"}},
		{map[string]any{`metadata.x'); SELECT $1 \`: map[string]any{"$is": "odd"}}, []string{"EX-A"}},
		{map[string]any{"metadata.shelf": map[string]any{"conditions": map[string]any{"$is_unknown": true}}}, []string{"EX-B"}},
		{map[string]any{"junction": "or", "metadata.seen": map[string]any{"$is": "true"}, "code": map[string]any{"$is": "EX-B"}},
			[]string{"EX-C", "EX-B"}},
	} {
		if got := codes(map[string]any{"filters": c.filter, "order": "-code"}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("filters %v: %v, want %v", c.filter, got, c.want)
		}
	}
	// What is not an order or a filter of the object is a 400 that says so.
	for _, body := range []map[string]any{
		{"exported_object": "voucher", "parameters": map[string]any{"order": "name"}},
		{"exported_object": "voucher", "parameters": map[string]any{"filters": map[string]any{"metadata.": map[string]any{"$is": "x"}}}},
		{"exported_object": "voucher", "parameters": map[string]any{"filters": map[string]any{"metadata.a\nb": map[string]any{"$is": "x"}}}},
		{"exported_object": "voucher", "parameters": map[string]any{"filters": map[string]any{"metadata.shelf": map[string]any{"$after": "x"}}}},
		{"exported_object": "voucher_transactions", "parameters": map[string]any{"filters": map[string]any{"metadata.shelf": map[string]any{"$is": "x"}}}},
	} {
		if r := a.Do("POST", "/v1/exports", body); r.Status != 400 || !strings.Contains(string(r.Body), "invalid_export_params") {
			t.Errorf("%v: %d %s, want 400 invalid_export_params", body, r.Status, r.Body)
		}
	}

	// Customers by email, a customer without one first.
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "cu-b", "email": "b@example.com", "metadata": map[string]any{"tier": "gold"}})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "cu-none"})
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "cu-a", "email": "a@example.com"})
	recs := rowsOf(a, "customer", map[string]any{"order": "email", "fields": []string{"source_id", "email"}})
	want := [][]string{{"Source ID", "Email"}, {"cu-none", ""}, {"cu-a", "a@example.com"}, {"cu-b", "b@example.com"}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("customers by email:\n%v\nwant\n%v", recs, want)
	}
	recs = rowsOf(a, "customer", map[string]any{"fields": []string{"source_id"},
		"filters": map[string]any{"metadata.tier": map[string]any{"$is": "gold"}}})
	if !reflect.DeepEqual(recs, [][]string{{"Source ID"}, {"cu-b"}}) {
		t.Fatalf("customers by metadata: %v", recs)
	}
}
