package erasure_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// personal are Ann's values: none may be read anywhere once she is erased.
var personal = []string{"Ann Forgetme", "ann.forget@example.com", "+48 600 700 800", "12 Erasure Street", "pistachio-ice",
	"ann-forget", "1984-02-29"}

// TestPermanentDeletionLeavesNoPersonalFieldReadable: a customer with an
// order (and one a redemption makes), a custom event and its activity, a
// place in a static segment, a loyalty card with points and a reward paid
// with them, a voucher redemption, a publication, exports whose files hold
// her, and webhook notices waiting in the outbox is permanently deleted.
// Afterwards no read route, export file, outbox row or async result holds
// her personal values; the card's balance is still its history's sum; her
// id reads as deleted and her source_id makes a new customer.
func TestPermanentDeletionLeavesNoPersonalFieldReadable(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	// A receiver that refuses: every notice stays pending in the outbox.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(down.Close)
	if r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/webhooks", a.E.MgmtHeader(),
		map[string]any{"target_url": down.URL + "/hooks", "events": []string{"customer.created", "customer.updated",
			"customer.deleted", "customer.order.paid", "customer.custom_event", "voucher.published"}}); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "visited", "schema": map[string]any{"properties": map[string]any{}}}); r.Status != 200 {
		t.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	ann := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann-forget", "name": "Ann Forgetme",
		"email": "ann.forget@example.com", "phone": "+48 600 700 800", "birthdate": "1984-02-29",
		"address":  map[string]any{"line_1": "12 Erasure Street", "city": "Kraków", "country": "PL"},
		"metadata": map[string]any{"favourite": "pistachio-ice"}})
	id := ann["id"].(string)
	bob := a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "name": "Bob Keep", "email": "bob@example.com"})["id"].(string)
	me := map[string]any{"id": id}
	seg := a.OK("POST", "/v1/segments", map[string]any{"name": "Both", "type": "static", "customers": []string{id, bob}})["id"].(string)

	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "amount": 5000, "customer": me})
	stacktest.Eventually(t, 3*time.Second, "the event accepted", func() bool {
		return a.Do("POST", "/v1/events", map[string]any{"event": "visited", "customer": me}).Status == 200
	})
	program := a.Campaign("Points", map[string]any{"type": "AUTO_UPDATE"})["id"].(string)
	code := a.OK("POST", "/v1/loyalties/"+program+"/members", map[string]any{"customer": me})["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 500})
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})
	a.OK("POST", "/v1/loyalties/"+program+"/rewards", []map[string]any{{"reward": mug["id"],
		"parameters": map[string]any{"loyalty": map[string]any{"points": 100}}}})
	a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": mug["id"]}})
	a.Voucher("TENOFF", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1000}})
	a.OK("POST", "/v1/publications", map[string]any{"voucher": "TENOFF", "customer": me})
	a.OK("POST", "/v1/redemptions", map[string]any{"customer": me, "redeemables": []any{map[string]any{"object": "voucher", "id": "TENOFF"}},
		"order": stacktest.Order([2]int{3000, 1})})
	var exps []string
	for _, body := range []map[string]any{{"exported_object": "customer"}, {"exported_object": "publication",
		"parameters": map[string]any{"fields": []string{"voucher_code", "customer_id", "customer_source_id"}}},
		{"exported_object": "voucher", "parameters": map[string]any{"fields": []string{"code", "voucher_type"}}}} {
		exps = append(exps, a.OK("POST", "/v1/exports", body)["id"].(string))
	}
	for _, e := range exps {
		stacktest.Eventually(t, 10*time.Second, "export "+e, func() bool { return a.OK("GET", "/v1/exports/"+e, nil)["status"] == "DONE" })
	}
	// A vouchers export "being made" while she is erased: a job whose
	// snapshot may predate the erasure (its state set here, as no test
	// can hold a real job between its read and its end).
	running := a.OK("POST", "/v1/exports", map[string]any{"exported_object": "voucher",
		"parameters": map[string]any{"fields": []string{"code"}}})["id"].(string)
	stacktest.Eventually(t, 10*time.Second, "export "+running, func() bool {
		return a.OK("GET", "/v1/exports/"+running, nil)["status"] == "DONE"
	})
	if _, err := a.E.Stack.Regional["api"].Pool().Exec(context.Background(),
		`UPDATE exports SET status = 'IN_PROGRESS' WHERE project_id = $1 AND id = $2`, a.P.ID, running); err != nil {
		t.Fatal(err)
	}
	customersFile := a.OK("GET", "/v1/exports/"+exps[0], nil)["result"].(map[string]any)["url"].(string)
	if f := a.E.Do(t, "GET", customersFile, nil, nil); !strings.Contains(string(f.Body), "Ann Forgetme") {
		t.Fatalf("the customers export should hold Ann before: %d %s", f.Status, f.Body)
	}
	if n := holding(t, a, "outbox", "payload", "Ann Forgetme"); n == 0 {
		t.Fatal("no notice holds Ann before her erasure")
	}
	before := a.OK("GET", "/v1/loyalties/members/"+code, nil)["loyalty_card"].(map[string]any)["balance"]

	d := a.OK("POST", "/v1/customers/"+id+"/permanent-deletion", nil)
	dj, _ := d["data_json"].(map[string]any)
	if !strings.HasPrefix(d["id"].(string), "del_") || d["object"] != "pernament_deletion" || d["status"] != "DONE" ||
		d["related_object"] != "customer" || d["related_object_id"] != id || dj["customer"] != 1.0 || dj["orders"] != 2.0 ||
		dj["events"] != 1.0 || stacktest.Num(dj["customer_events"]) < 1 || dj["segments"] != 1.0 {
		t.Fatalf("deletion: %v", d)
	}

	// Every read route: nothing of hers.
	read := []string{"/v1/customers?limit=100", "/v1/orders?limit=100", "/v1/redemptions?limit=100", "/v1/publications?limit=100",
		"/v1/exports?limit=100", "/v1/loyalties/" + program + "/members?limit=100",
		"/v1/loyalties/members/" + code, "/v1/loyalties/members/" + code + "/transactions?limit=100",
		"/v1/loyalties/" + program + "/members/" + code + "/activity", "/v1/vouchers/TENOFF", "/v1/vouchers?limit=100",
		"/v1/customers/" + bob, "/v1/customers/" + bob + "/activity", "/v1/customers/" + id + "/activity",
		"/v1/customers/" + id + "/redeemables", "/v1/orders/o-1", "/v1/segments/" + seg}
	for _, l := range a.OK("GET", "/v1/redemptions?limit=100", nil)["redemptions"].([]any) {
		read = append(read, "/v1/redemptions/"+l.(map[string]any)["id"].(string))
	}
	for _, p := range read {
		r := a.Do("GET", p, nil)
		for _, v := range personal {
			if strings.Contains(string(r.Body), v) {
				t.Errorf("GET %s still reads %q: %s", p, v, r.Body)
			}
		}
	}
	// What the project retains (files, the outbox, async results) is
	// erased by the deletion's task, soon after its answer.
	stacktest.Eventually(t, 20*time.Second, "the erasure task done", func() bool { return erasing(t, a) == 0 })
	// The files that held her are gone, and say why; the others stay.
	for i, e := range exps {
		x := a.OK("GET", "/v1/exports/"+e, nil)
		if i < 2 && (x["status"] != "ERROR" || x["error"].(map[string]any)["code"] != "customer_erased") {
			t.Errorf("export %s of her: %v", e, x)
		}
		if i == 2 && x["status"] != "DONE" {
			t.Errorf("export %s of vouchers: %v", e, x)
		}
	}
	if f := a.E.Do(t, "GET", customersFile, nil, nil); f.Status == 200 || strings.Contains(string(f.Body), "Ann") {
		t.Errorf("the customers file after: %d %s", f.Status, f.Body)
	}
	if x := a.OK("GET", "/v1/exports/"+running, nil); x["status"] != "ERROR" || x["error"].(map[string]any)["code"] != "customer_erased" {
		t.Errorf("the export being made: %v", x)
	}
	// An export made again holds nothing of hers either.
	for _, object := range []string{"customer", "publication", "redemption", "order"} {
		x := a.OK("POST", "/v1/exports", map[string]any{"exported_object": object})["id"].(string)
		stacktest.Eventually(t, 10*time.Second, "export "+x, func() bool { return a.OK("GET", "/v1/exports/"+x, nil)["status"] == "DONE" })
		f := a.E.Do(t, "GET", a.OK("GET", "/v1/exports/"+x, nil)["result"].(map[string]any)["url"].(string), nil, nil)
		for _, v := range personal {
			if strings.Contains(string(f.Body), v) {
				t.Errorf("a new %s export holds %q: %s", object, v, f.Body)
			}
		}
		a.Do("DELETE", "/v1/exports/"+x, nil) // its default fields are not all the reference's (GET /v1/exports)
	}
	for _, v := range personal {
		if n := holding(t, a, "outbox", "payload", v); n > 0 {
			t.Errorf("%d outbox rows still hold %q", n, v)
		}
		if n := holding(t, a, "async_actions", "result", v); n > 0 {
			t.Errorf("%d async action results still hold %q", n, v)
		}
	}
	if holding(t, a, "outbox", "payload", "Bob Keep") == 0 {
		t.Error("Bob's notices were taken too")
	}

	if m := a.OK("GET", "/v1/customers?segment_id="+seg, nil)["customers"].([]any); len(m) != 1 || m[0].(map[string]any)["id"] != bob {
		t.Errorf("the segment's members after: %v", m)
	}

	// Points add up: the balance is unchanged and is its history's sum.
	card := a.OK("GET", "/v1/loyalties/members/"+code, nil)
	if card["loyalty_card"].(map[string]any)["balance"] != before || card["holder_id"] != id {
		t.Errorf("card after: %v (balance before %v)", card, before)
	}
	var sum float64
	for _, tx := range a.History(code) {
		sum += tx["details"].(map[string]any)["balance"].(map[string]any)["points"].(float64)
	}
	if sum != before.(float64) {
		t.Errorf("history sums to %v, balance %v", sum, before)
	}

	// Her id says deleted, and is never written again; her source_id is free.
	e := a.Fails("GET", "/v1/customers/"+id, nil, 404, "not_found")
	if e["message"] != "Customer deleted" || !strings.Contains(e["details"].(string), d["id"].(string)) {
		t.Errorf("a read after: %v", e)
	}
	a.Fails("PUT", "/v1/customers/"+id, map[string]any{"name": "Back"}, 404, "not_found")
	a.Fails("POST", "/v1/orders", map[string]any{"source_id": "o-2", "amount": 100, "customer": me}, 404, "not_found")
	a.Fails("POST", "/v1/customers/"+id+"/permanent-deletion", nil, 404, "not_found")
	again := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann-forget"})
	if again["id"] == id || again["name"] != nil {
		t.Errorf("a new customer with her source_id: %v", again)
	}
}

// holding counts the project's rows of table whose JSON column holds v:
// what no route reads whole (the outbox), or reads in a shape the
// reference's list describes otherwise (async action results).
func holding(t *testing.T, a stacktest.API, table, column, v string) int {
	t.Helper()
	var n int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM `+table+` WHERE project_id = $1 AND strpos(`+column+`::TEXT, $2) > 0`, a.P.ID, v).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// erasing counts the project's erasure tasks not yet done.
func erasing(t *testing.T, a stacktest.API) int {
	t.Helper()
	var n int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox
		WHERE project_id = $1 AND kind = 'customer.erasure' AND status <> 'done'`, a.P.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
