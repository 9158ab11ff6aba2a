package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/earning"
	"github.com/tallyhq/tally/regional/events"
)

func TestMain(m *testing.M) {
	stacktest.TraceRequests() // TestAnEventIsStoredInTwoRoundTrips counts them
	dbtest.Main(m)
}

// schema defines a custom event of the project through the management API.
func schema(a stacktest.API, name string, props map[string]any) map[string]any {
	a.T.Helper()
	r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": name, "schema": map[string]any{"properties": props}})
	if r.Status != 200 {
		a.T.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	return r.JSON(a.T)
}

// send posts an event once its schema is in force on the regional side.
func send(a stacktest.API, body map[string]any) map[string]any {
	a.T.Helper()
	var out map[string]any
	stacktest.Eventually(a.T, 3*time.Second, "the event accepted", func() bool {
		r := a.Do("POST", "/v1/events", body)
		if r.Status == 200 {
			out = r.JSON(a.T)
			return true
		}
		if r.Status != 400 || !strings.Contains(string(r.Body), "has no schema") {
			a.T.Fatalf("event: %d %s", r.Status, r.Body)
		}
		return false
	})
	return out
}

func TestEventsAreCheckedRecordedAndAnsweredOnce(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.custom_event")
	sc := schema(a, "store_visit", map[string]any{"store": map[string]any{"type": "string"}, "spent": map[string]any{"type": "number"},
		"first": map[string]any{"type": "boolean", "optional": true}, "on": map[string]any{"type": "date", "optional": true},
		"at": map[string]any{"type": "datetime", "optional": true}})

	ev := send(a, map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann", "name": "Ann"},
		"metadata": map[string]any{"store": "Oslo", "spent": 12.5, "on": "2026-01-31", "at": "2026-01-31T10:00:00Z", "extra": "kept"}})
	cust := ev["customer"].(map[string]any)
	if ev["object"] != "event" || ev["type"] != "store_visit" || ev["referral"] != nil || ev["loyalty"] != nil ||
		!strings.HasPrefix(ev["id"].(string), "evcus_") || cust["source_id"] != "ann" || cust["name"] != "Ann" ||
		cust["object"] != "customer" || !strings.HasPrefix(cust["id"].(string), "cust_") ||
		ev["metadata"].(map[string]any)["spent"] != 12.5 || ev["metadata"].(map[string]any)["extra"] != "kept" {
		t.Fatalf("event: %v", ev)
	}
	custID := cust["id"].(string)
	if c := a.OK("GET", "/v1/customers/ann", nil); c["id"] != custID || c["name"] != "Ann" {
		t.Fatalf("the customer made by source_id: %v", c)
	}
	// By id, with a card named: stored, answered as null. (A referral
	// converts through regional/referrals, whose tests send them; an
	// unknown code is 404 there.)
	campID := a.Campaign("Visits", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	ev2 := send(a, map[string]any{"event": "store_visit", "customer": map[string]any{"id": custID},
		"loyalty": map[string]any{"code": code}, "metadata": map[string]any{"store": "Bergen", "spent": 3}})
	if ev2["referral"] != nil || ev2["loyalty"] != nil || ev2["customer"].(map[string]any)["id"] != custID {
		t.Fatalf("second event: %v", ev2)
	}

	// Two requests with one key at once: one event, one answer.
	hk := a.P.Header()
	hk.Set("Idempotency-Key", "race-1")
	var wg sync.WaitGroup
	bodies := make([]string, 4)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := stacktest.Do(t, a.E.Client, "POST", stacktest.URL("api", "/v1/events"), hk, map[string]any{"event": "store_visit",
				"customer": map[string]any{"source_id": "racer"}, "metadata": map[string]any{"store": "Oslo", "spent": 1}})
			if r.Status != 200 {
				t.Errorf("racing key: %d %s", r.Status, r.Body)
			}
			bodies[i] = string(r.Body)
		}()
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("racing requests with one key answered differently:\n%s\n%s", bodies[0], b)
		}
	}
	if n := len(a.OK("GET", "/v1/customers/racer/activity", nil)["data"].([]any)); n != 1 {
		t.Fatalf("racing requests with one key recorded %d events", n)
	}

	// Everything refused, and why.
	long := strings.Repeat("e", 301)
	for _, c := range []struct {
		body   any
		status int
		detail string
	}{
		{map[string]any{"customer": map[string]any{"source_id": "ann"}}, 400, "event is required"},
		{map[string]any{"event": "", "customer": map[string]any{"source_id": "ann"}}, 400, "event is required"},
		{map[string]any{"event": long, "customer": map[string]any{"source_id": "ann"}}, 400, "at most 300"},
		{map[string]any{"event": "store_visit"}, 400, "customer is required"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"name": "Nobody"}}, 400, "id or a source_id"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "metadata": map[string]any{"store": "Oslo", "spent": "12"}},
			400, "metadata.spent must be a number"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "metadata": map[string]any{"store": "Oslo"}},
			400, "metadata.spent is required"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "metadata": map[string]any{"store": "Oslo", "spent": 1, "on": "31.01.2026"}},
			400, "metadata.on must be a date"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "metadata": map[string]any{"store": "Oslo", "spent": 1, "at": "noon"}},
			400, "metadata.at must be a datetime"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "metadata": map[string]any{"store": 5, "spent": 1}},
			400, "metadata.store must be a string"},
		{map[string]any{"event": "unknown_thing", "customer": map[string]any{"source_id": "ann"}}, 400, `"unknown_thing" has no schema`},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"id": "cust_nope"}, "metadata": map[string]any{"store": "Oslo", "spent": 1}},
			404, "cust_nope"},
		{map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"}, "loyalty": map[string]any{"code": "LC-NOPE"},
			"metadata": map[string]any{"store": "Oslo", "spent": 1}}, 404, "LC-NOPE"},
	} {
		r := a.Do("POST", "/v1/events", c.body)
		m := r.JSON(t)
		if r.Status != c.status || !strings.Contains(fmt.Sprint(m["details"]), c.detail) {
			t.Fatalf("%v: %d %s, want %d naming %q", c.body, r.Status, r.Body, c.status, c.detail)
		}
	}
	if m := a.Fails("POST", "/v1/events", map[string]any{"event": "store_visit", "customer": map[string]any{"id": "cust_nope"},
		"metadata": map[string]any{"store": "Oslo", "spent": 1}}, 404, "not_found"); m["resource_type"] != "customer" {
		t.Fatalf("unknown customer: %v", m)
	}

	// The activity, newest first, in the reference's shape; the webhook.
	acts := a.OK("GET", "/v1/customers/"+custID+"/activity?limit=1", nil)
	data := acts["data"].([]any)
	if acts["object"] != "list" || acts["has_more"] != true || len(data) != 1 {
		t.Fatalf("activity: %v", acts)
	}
	act := data[0].(map[string]any)
	d := act["data"].(map[string]any)["data"].(map[string]any)
	if act["type"] != "customer.custom_event" || d["event"].(map[string]any)["id"] != ev2["id"] ||
		d["event"].(map[string]any)["loyalty"].(map[string]any)["code"] != code ||
		d["event"].(map[string]any)["referral"] != nil ||
		d["event_schema"].(map[string]any)["id"] != sc["id"] || d["event_schema"].(map[string]any)["name"] != "store_visit" ||
		d["customer"].(map[string]any)["id"] != custID {
		t.Fatalf("activity entry: %v", act)
	}
	next := a.OK("GET", "/v1/customers/ann/activity?starting_after_id="+act["id"].(string), nil)
	if d := next["data"].([]any); len(d) != 1 || d[0].(map[string]any)["data"].(map[string]any)["data"].(map[string]any)["event"].(map[string]any)["id"] != ev["id"] {
		t.Fatalf("activity, next page: %v", next)
	}
	// Three events so far (ann's two and the racers' one), each raised once.
	if o := hooks.Wait(t, "customer.custom_event", 3); o["event"].(map[string]any)["type"] != "store_visit" ||
		o["event_schema"].(map[string]any)["id"] != sc["id"] || hooks.Count("customer.custom_event") != 3 {
		t.Fatalf("webhook: %v", o)
	}
	a.Fails("GET", "/v1/customers/cust_nope/activity", nil, 404, "not_found")

	// Idempotency-Key: the same request answers the first answer and
	// records nothing twice; another request with the key is refused.
	h := a.P.Header()
	h.Set("Idempotency-Key", "visit-42")
	body := map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "bob"}, "metadata": map[string]any{"store": "Oslo", "spent": 1}}
	first := a.E.Do(t, "POST", stacktest.URL("api", "/v1/events"), h, body)
	again := a.E.Do(t, "POST", stacktest.URL("api", "/v1/events"), h, body)
	if first.Status != 200 || again.Status != 200 || string(first.Body) != string(again.Body) {
		t.Fatalf("replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
	}
	if n := len(a.OK("GET", "/v1/customers/bob/activity", nil)["data"].([]any)); n != 1 {
		t.Fatalf("a replayed event recorded %d times", n)
	}
	body["metadata"] = map[string]any{"store": "Oslo", "spent": 2}
	if r := a.E.Do(t, "POST", stacktest.URL("api", "/v1/events"), h, body); r.Status != 409 || r.JSON(t)["key"] != "idempotency_key_reused" {
		t.Fatalf("a reused key: %d %s", r.Status, r.Body)
	}

	// A schema change is in force on the regional side within 2 s.
	r := a.E.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas/"+sc["id"].(string), a.E.MgmtHeader(),
		map[string]any{"schema": map[string]any{"properties": map[string]any{"first": map[string]any{"type": "boolean", "optional": false}}}})
	if r.Status != 200 {
		t.Fatalf("schema update: %d %s", r.Status, r.Body)
	}
	stacktest.Eventually(t, 2*time.Second, "the schema change in force", func() bool {
		return a.Do("POST", "/v1/events", map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"},
			"metadata": map[string]any{"store": "Oslo", "spent": 1}}).Status == 400
	})
}

func TestCustomEventRulesAccrueOncePerEventRuleAndCard(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	sc := schema(a, "review", map[string]any{"words": map[string]any{"type": "number"}})
	other := schema(a, "share", map[string]any{})
	campID := a.Campaign("Reviews", nil)["id"].(string)
	second := a.Campaign("Second", nil)["id"].(string)
	code := a.Member(campID, "cy")["code"].(string)
	code2 := a.Member(second, "cy")["code"].(string)
	rules := func(camp string, body []map[string]any) []map[string]any {
		t.Helper()
		r := a.Do("POST", "/v1/loyalties/"+camp+"/earning-rules", body)
		var out []map[string]any
		if r.Status != 200 || json.Unmarshal(r.Body, &out) != nil {
			t.Fatalf("rules: %d %s", r.Status, r.Body)
		}
		return out
	}
	ce := map[string]any{"schema_id": sc["id"]}
	fixed := rules(campID, []map[string]any{{"event": "review", "custom_event": ce, "source": map[string]any{"banner": "Review bonus"},
		"loyalty": map[string]any{"type": "FIXED", "points": 50}}})[0]
	prop := rules(campID, []map[string]any{{"event": "review", "custom_event": ce, "loyalty": map[string]any{"type": "PROPORTIONAL",
		"calculation_type": "CUSTOM_EVENT_METADATA", "custom_event": map[string]any{"metadata": map[string]any{"every": 100, "points": 3, "property": "words"}}}}})[0]
	if prop["loyalty"].(map[string]any)["custom_event"].(map[string]any)["metadata"].(map[string]any)["property"] != "words" ||
		prop["custom_event"].(map[string]any)["schema_id"] != sc["id"] {
		t.Fatalf("proportional rule: %v", prop)
	}
	// Rules in the second campaign: one disabled, one not yet started, one ended.
	off := rules(second, []map[string]any{{"event": "review", "custom_event": ce, "loyalty": map[string]any{"type": "FIXED", "points": 7}}})[0]
	a.OK("POST", "/v1/loyalties/"+second+"/earning-rules/"+off["id"].(string)+"/disable", nil)
	rules(second, []map[string]any{{"event": "review", "custom_event": ce, "start_date": time.Now().Add(48 * time.Hour).Format(time.RFC3339),
		"loyalty": map[string]any{"type": "FIXED", "points": 9}}})
	rules(second, []map[string]any{{"event": "review", "custom_event": ce, "start_date": time.Now().Add(-48 * time.Hour).Format(time.RFC3339),
		"expiration_date": time.Now().Add(-24 * time.Hour).Format(time.RFC3339), "loyalty": map[string]any{"type": "FIXED", "points": 11}}})

	// Rules that do not fit their schema are refused.
	for _, bad := range []map[string]any{
		{"event": "review", "loyalty": map[string]any{"type": "FIXED", "points": 5}},
		{"event": "review", "custom_event": map[string]any{"schema_id": other["id"]}, "loyalty": map[string]any{"type": "FIXED", "points": 5}},
		{"event": "review", "custom_event": map[string]any{"schema_id": "ms_nope"}, "loyalty": map[string]any{"type": "FIXED", "points": 5}},
		{"event": "review", "custom_event": ce, "loyalty": map[string]any{"type": "PROPORTIONAL", "calculation_type": "CUSTOM_EVENT_METADATA",
			"custom_event": map[string]any{"metadata": map[string]any{"every": 1, "points": 1, "property": "stars"}}}},
		{"event": "review", "custom_event": ce, "loyalty": map[string]any{"type": "PROPORTIONAL", "calculation_type": "ORDER_AMOUNT",
			"order": map[string]any{"amount": map[string]any{"every": 1, "points": 1}}}},
	} {
		if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{bad}); r.Status != 400 && r.Status != 404 {
			t.Fatalf("%v: %d %s", bad, r.Status, r.Body)
		}
	}

	// 250 words: 50 fixed + 2 × 3 proportional, on the campaign's card only.
	ev := send(a, map[string]any{"event": "review", "customer": map[string]any{"source_id": "cy"}, "metadata": map[string]any{"words": 250}})
	stacktest.Eventually(t, 10*time.Second, "two accruals", func() bool { return len(a.History(code)) == 2 })
	h := a.History(code)
	byRule := map[string]map[string]any{}
	for _, tx := range h {
		stacktest.CheckTx(t, tx, "POINTS_ACCRUAL", "balance", "custom_event", "earning_rule", "event_schema")
		d := tx["details"].(map[string]any)
		if d["custom_event"].(map[string]any)["id"] != ev["id"] || d["custom_event"].(map[string]any)["type"] != "review" ||
			d["event_schema"].(map[string]any)["id"] != sc["id"] || d["event_schema"].(map[string]any)["name"] != "review" {
			t.Fatalf("details: %v", d)
		}
		byRule[d["earning_rule"].(map[string]any)["id"].(string)] = tx
	}
	if b := byRule[fixed["id"].(string)]["details"].(map[string]any); b["balance"].(map[string]any)["points"] != 50.0 ||
		b["earning_rule"].(map[string]any)["source"].(map[string]any)["banner"] != "Review bonus" {
		t.Fatalf("fixed accrual: %v", b)
	}
	if b := byRule[prop["id"].(string)]["details"].(map[string]any)["balance"].(map[string]any); b["points"] != 6.0 {
		t.Fatalf("proportional accrual: %v", b)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(a.History(code2)); n != 0 {
		t.Fatalf("a disabled rule and one not started earned %d entries", n)
	}

	// loyalty.code names the one card to credit.
	send(a, map[string]any{"event": "review", "customer": map[string]any{"source_id": "cy"}, "loyalty": map[string]any{"code": code},
		"metadata": map[string]any{"words": 10}})
	stacktest.Eventually(t, 10*time.Second, "the fixed accrual", func() bool { return len(a.History(code)) == 3 })

	// The task run again earns nothing more.
	custID := ev["customer"].(map[string]any)["id"].(string)
	payload := earning.CustomEvent{ID: ev["id"].(string), Type: "review", CustomerID: custID, SchemaID: sc["id"].(string),
		SchemaName: "review", Metadata: map[string]any{"words": 250}}
	pool := a.E.Stack.Regional["api"].Pool()
	taskID, err := async.Enqueue(context.Background(), pool, a.P.ID, async.NewTask{Kind: events.KindAccrue, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "the replayed task done", func() bool {
		var status string
		err := pool.QueryRow(context.Background(), `SELECT status FROM outbox WHERE project_id = $1 AND id = $2`, a.P.ID, taskID).Scan(&status)
		return err == nil && status == "done"
	})
	if n := len(a.History(code)); n != 3 {
		t.Fatalf("the replayed task earned again: %d entries", n)
	}
	if bal := a.OK("GET", "/v1/loyalties/members/"+code, nil)["loyalty_card"].(map[string]any)["balance"]; bal != 106.0 {
		t.Fatalf("balance %v", bal)
	}
}

// history is all of a card's transactions, page after page.
func history(a stacktest.API, code string) []map[string]any {
	a.T.Helper()
	var out []map[string]any
	after := ""
	for {
		p := a.OK("GET", "/v1/loyalties/members/"+code+"/transactions?order=id&limit=100"+after, nil)
		for _, d := range p["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		if p["has_more"] != true {
			return out
		}
		after = "&starting_after_id=" + p["more_starting_after"].(string)
	}
}

// 16 clients send events for one card at once: every accrual lands, and
// the balance is the sum of the card's transactions.
func TestConcurrentEventsForOneCard(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	sc := schema(a, "tap", map[string]any{})
	campID := a.Campaign("Taps", nil)["id"].(string)
	code := a.Member(campID, "dee")["code"].(string)
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "tap", "custom_event": map[string]any{"schema_id": sc["id"]},
		"loyalty": map[string]any{"type": "FIXED", "points": 3}}}); r.Status != 200 {
		t.Fatalf("rule: %d %s", r.Status, r.Body)
	}
	send(a, map[string]any{"event": "tap", "customer": map[string]any{"source_id": "dee"}})
	const clients, each = 16, 10
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				body := map[string]any{"event": "tap", "customer": map[string]any{"source_id": "dee"}}
				if (i+j)%2 == 0 {
					body["loyalty"] = map[string]any{"code": code}
				}
				if r := a.Do("POST", "/v1/events", body); r.Status != http.StatusOK {
					t.Errorf("event: %d %s", r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := 1 + clients*each
	stacktest.Eventually(t, 30*time.Second, "every accrual", func() bool {
		return len(history(a, code)) == want
	})
	sum := 0.0
	for _, tx := range history(a, code) {
		sum += tx["details"].(map[string]any)["balance"].(map[string]any)["points"].(float64)
	}
	if bal := a.OK("GET", "/v1/loyalties/members/"+code, nil)["loyalty_card"].(map[string]any)["balance"]; bal != sum || sum != float64(3*want) {
		t.Fatalf("balance %v, sum of transactions %v, want %d", bal, sum, 3*want)
	}
}

func TestBulkEventsReportEachRefusal(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	schema(a, "visit", map[string]any{"store": map[string]any{"type": "string"}})
	send(a, map[string]any{"event": "visit", "customer": map[string]any{"source_id": "warm"}, "metadata": map[string]any{"store": "x"}})
	var body []any
	for i := range 50 {
		body = append(body, map[string]any{"event": "visit", "customer": map[string]any{"source_id": fmt.Sprintf("c%d", i%5)},
			"metadata": map[string]any{"store": fmt.Sprint(i)}})
	}
	body[7] = map[string]any{"event": "visit", "customer": map[string]any{"source_id": "c1"}}
	body[20] = "not an event"
	body[33] = map[string]any{"event": "nope", "customer": map[string]any{"source_id": "c1"}}
	r := a.Do("POST", "/v1/events/bulk/async", body)
	if r.Status != 202 {
		t.Fatalf("bulk: %d %s", r.Status, r.Body)
	}
	act := a.WaitAction(r.JSON(t)["async_action_id"].(string))
	res := act["result"].(map[string]any)
	errs := res["errors"].([]any)
	if res["total"] != 50.0 || res["stored"] != 47.0 || res["failed"] != 3.0 || len(errs) != 3 ||
		errs[0].(map[string]any)["index"] != 7.0 || !strings.Contains(errs[0].(map[string]any)["message"].(string), "metadata.store") ||
		errs[1].(map[string]any)["index"] != 20.0 || errs[2].(map[string]any)["index"] != 33.0 {
		t.Fatalf("bulk result: %v", res)
	}
	n := 0
	for i := range 5 {
		n += len(a.OK("GET", fmt.Sprintf("/v1/customers/c%d/activity?limit=100", i), nil)["data"].([]any))
	}
	if n != 47 {
		t.Fatalf("%d activities, want 47", n)
	}
	a.Fails("POST", "/v1/events/bulk/async", []any{}, 400, "invalid_payload")
}

// A customer's events and activity hold their personal data: deleting the
// customer deletes them.
func TestACustomersEventsGoWithTheCustomer(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	schema(a, "ping", map[string]any{})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "gone", "email": "gone@example.com"}})
	send(a, map[string]any{"event": "ping", "customer": map[string]any{"source_id": "kept"}})
	gone := a.OK("GET", "/v1/customers/gone", nil)["id"].(string)
	rows := func(table, customerID string) int {
		var n int
		if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM `+table+` WHERE project_id = $1 AND customer_id = $2`, a.P.ID, customerID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if rows("custom_events", gone) != 1 || rows("customer_activities", gone) != 1 {
		t.Fatal("the event was not stored")
	}
	if r := a.Do("DELETE", "/v1/customers/gone", nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if n, m := rows("custom_events", gone), rows("customer_activities", gone); n != 0 || m != 0 {
		t.Fatalf("%d events and %d activities left of a deleted customer", n, m)
	}
	if n := len(a.OK("GET", "/v1/customers/kept/activity", nil)["data"].([]any)); n != 1 {
		t.Fatalf("another customer's activity: %d", n)
	}
}
