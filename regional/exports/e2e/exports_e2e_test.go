package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/dltoken"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// waitDone polls an export until it is DONE and returns it.
func waitDone(a stacktest.API, id string) map[string]any {
	a.T.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		e := a.OK("GET", "/v1/exports/"+id, nil)
		switch e["status"] {
		case "DONE":
			return e
		case "ERROR":
			a.T.Fatalf("export failed: %v", e)
		}
		if time.Now().After(deadline) {
			a.T.Fatalf("export not done: %v", e)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// get fetches rawURL with header.
func get(a stacktest.API, rawURL string, header http.Header) stacktest.Resp {
	a.T.Helper()
	return stacktest.Do(a.T, a.E.Client, "GET", rawURL, header, nil)
}

// file downloads a DONE export's part from its link, with the link alone,
// and returns its records.
func file(a stacktest.API, link string) [][]string {
	a.T.Helper()
	r := get(a, link, nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		a.T.Fatalf("download %s: %d %v %s", link, r.Status, r.Header, r.Body)
	}
	recs, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	if err != nil {
		a.T.Fatalf("the file is not CSV: %v\n%s", err, r.Body)
	}
	return recs
}

func export(a stacktest.API, path string, body any) map[string]any {
	a.T.Helper()
	e := a.OK("POST", path, body)
	if e["status"] != "SCHEDULED" || e["object"] != "export" || e["channel"] != "API" || !strings.HasPrefix(e["id"].(string), "exp_") ||
		e["result"] != nil {
		a.T.Fatalf("export request: %v", e)
	}
	return waitDone(a, e["id"].(string))
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case float64:
		return fmt.Sprint(int64(v))
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// allFields are the columns of the specification's table.
var allFields = []string{"id", "voucher_id", "type", "source_id", "reason", "source", "balance", "amount",
	"related_transaction_id", "created_at", "details"}

// expected renders history entries as the export's rows of fields.
func expected(t *testing.T, txs []map[string]any, fields []string) [][]string {
	var out [][]string
	for _, tx := range txs {
		bal := tx["details"].(map[string]any)["balance"].(map[string]any)
		var row []string
		for _, f := range fields {
			switch f {
			case "balance":
				row = append(row, str(bal["balance"]))
			case "amount":
				row = append(row, str(bal["points"]))
			default:
				row = append(row, str(tx[f]))
			}
		}
		out = append(out, row)
	}
	return out
}

// sameRows compares the file's records with the history's, details as JSON.
func sameRows(t *testing.T, what string, got, want [][]string, fields []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d\n%v\n%v", what, len(got), len(want), got, want)
	}
	for i := range got {
		for j, f := range fields {
			if f == "details" {
				var g, w any
				if json.Unmarshal([]byte(got[i][j]), &g) != nil || json.Unmarshal([]byte(want[i][j]), &w) != nil || !reflect.DeepEqual(g, w) {
					t.Fatalf("%s: row %d details %s, want %s", what, i, got[i][j], want[i][j])
				}
				continue
			}
			if got[i][j] != want[i][j] {
				t.Fatalf("%s: row %d %s = %q, want %q\n%v\n%v", what, i, f, got[i][j], want[i][j], got[i], want[i])
			}
		}
	}
}

func byID(txs []map[string]any) []map[string]any {
	sort.Slice(txs, func(i, j int) bool { return txs[i]["id"].(string) < txs[j]["id"].(string) })
	return txs
}

// everyType makes a campaign whose two cards hold a transaction of every
// type, and returns the campaign's id and the cards' codes.
func everyType(t *testing.T, a stacktest.API) (string, string, string) {
	campID := a.Campaign("Every type", nil)["id"].(string)
	ann, bob := a.Member(campID, "ann")["code"].(string), a.Member(campID, "bob")["code"].(string)
	// POINTS_ACCRUAL from a paid order.
	if r := a.Do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{{"event": "order.paid",
		"source": map[string]any{"banner": "Per order"}, "loyalty": map[string]any{"type": "FIXED", "points": 300}}}); r.Status != 200 {
		t.Fatalf("earning rule: %d %s", r.Status, r.Body)
	}
	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "amount": 1000, "customer": map[string]any{"source_id": "ann"}})
	stacktest.Eventually(t, 10*time.Second, "the accrual", func() bool { return len(a.History(ann)) == 1 })
	// POINTS_ADDITION with a source id and a reason that needs quoting, and POINTS_REMOVAL.
	a.OK("POST", "/v1/loyalties/members/"+ann+"/balance", map[string]any{"points": 200, "source_id": "crm-1", "reason": "welcome, \"friend\"\nline two"})
	a.OK("POST", "/v1/loyalties/members/"+ann+"/balance", map[string]any{"points": -50, "reason": "correction"})
	// POINTS_TRANSFER_OUT and POINTS_TRANSFER_IN.
	a.OK("POST", "/v1/loyalties/"+campID+"/members/"+bob+"/transfers", []map[string]any{{"code": ann, "points": 20, "reason": "gift", "source_id": "tr-1"}})
	// POINTS_REDEMPTION and POINTS_REFUND.
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": mug["id"], "parameters": map[string]any{"loyalty": map[string]any{"points": 100}}})
	red := a.OK("POST", "/v1/loyalties/members/"+ann+"/redemption", map[string]any{"reward": map[string]any{"id": mug["id"]}})
	a.OK("POST", "/v1/redemptions/"+red["id"].(string)+"/rollback", nil)
	// POINTS_EXPIRATION.
	tomorrow := a.E.Clock.Today().AddDate(0, 0, 1).Format(time.DateOnly)
	a.OK("POST", "/v1/loyalties/members/"+bob+"/balance", map[string]any{"points": 5, "expiration_type": "CUSTOM_DATE", "expiration_date": tomorrow})
	a.E.Clock.Advance(3 * 24 * time.Hour)
	stacktest.Eventually(t, 10*time.Second, "the expiration", func() bool { return len(a.History(bob)) == 3 })
	return campID, ann, bob
}

func TestEveryTransactionTypeExportsAsTheHistoryShowsIt(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("export.completed")
	campID, ann, bob := everyType(t, a)
	history := byID(append(a.History(ann), a.History(bob)...))
	types := map[string]bool{}
	for _, tx := range history {
		types[tx["type"].(string)] = true
	}
	if len(types) != 8 {
		t.Fatalf("the set-up made %d types: %v", len(types), types)
	}

	// Every field, by the campaign's name, oldest first.
	e := export(a, "/v1/loyalties/Every%20type/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	p := e["parameters"].(map[string]any)
	f := p["filters"].(map[string]any)
	if e["exported_object"] != "voucher_transactions" || p["order"] != "created_at" || p["response_format"] != "CSV" ||
		f["junction"] != "and" || str(f["campaign_id"]) != `{"conditions":{"$in":["`+campID+`"]}}` {
		t.Fatalf("normalised parameters: %v", e)
	}
	res := e["result"].(map[string]any)
	if res["rows"] != float64(len(history)) || len(res["urls"].([]any)) != 1 || res["url"] != res["urls"].([]any)[0] ||
		!strings.HasPrefix(res["url"].(string), "http://download.localhost:") || e["progress"] != 100.0 || e["error"] != nil {
		t.Fatalf("result: %v", e)
	}
	recs := file(a, res["url"].(string))
	if strings.Join(recs[0], ",") != "ID,Voucher ID,Type,Source ID,Reason,Source,Balance,Amount,Related Transaction ID,Created At,Details" {
		t.Fatalf("header: %v", recs[0])
	}
	sameRows(t, "all fields", recs[1:], expected(t, history, allFields), allFields)

	// Newest first, by the top-level order the specification's example sends.
	e = export(a, "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"order": "-created_at", "parameters": map[string]any{"fields": allFields}})
	rev := append([]map[string]any(nil), history...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	sameRows(t, "newest first", file(a, e["result"].(map[string]any)["url"].(string))[1:], expected(t, rev, allFields), allFields)

	// No body: the default columns.
	e = export(a, "/v1/loyalties/"+campID+"/transactions/export", nil)
	recs = file(a, e["result"].(map[string]any)["url"].(string))
	defaults := []string{"id", "type", "source_id", "reason", "source", "balance", "amount", "created_at"}
	if strings.Join(recs[0], ",") != "ID,Type,Source ID,Reason,Source,Balance,Amount,Created At" {
		t.Fatalf("default header: %v", recs[0])
	}
	sameRows(t, "default columns", recs[1:], expected(t, history, defaults), defaults)

	// Filters: a card, array and scalar values, a date, a type, or.
	bobID := a.OK("GET", "/v1/loyalties/members/"+bob, nil)["id"].(string)
	var bobs, later, removals []map[string]any
	cut := history[len(history)/2]["created_at"].(string)
	for _, tx := range history {
		if tx["voucher_id"] == bobID {
			bobs = append(bobs, tx)
		}
		if tx["created_at"].(string) > cut {
			later = append(later, tx)
		}
		if tx["type"] == "POINTS_REMOVAL" || tx["type"] == "POINTS_EXPIRATION" {
			removals = append(removals, tx)
		}
	}
	for _, c := range []struct {
		name    string
		filters any
		want    []map[string]any
	}{
		{"a card", map[string]any{"voucher_id": map[string]any{"conditions": map[string]any{"$in": []string{bobID}}}}, bobs},
		{"after, as an array", map[string]any{"created_at": map[string]any{"conditions": map[string]any{"$after": []string{cut}}}}, later},
		{"after, as a scalar", map[string]any{"junction": "AND", "created_at": map[string]any{"conditions": map[string]any{"$after": cut}}}, later},
		{"types", map[string]any{"type": map[string]any{"conditions": map[string]any{"$in": []string{"POINTS_REMOVAL", "POINTS_EXPIRATION"}}}}, removals},
	} {
		e := export(a, "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields, "filters": c.filters}})
		sameRows(t, c.name, file(a, e["result"].(map[string]any)["url"].(string))[1:], expected(t, c.want, allFields), allFields)
	}
	// One card's export, by code, shows the card it is limited to.
	e = export(a, "/v1/loyalties/members/"+bob+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	if str(e["parameters"].(map[string]any)["filters"].(map[string]any)["voucher_id"]) != `{"conditions":{"$in":["`+bobID+`"]}}` {
		t.Fatalf("card export parameters: %v", e["parameters"])
	}
	sameRows(t, "one card", file(a, e["result"].(map[string]any)["url"].(string))[1:], expected(t, bobs, allFields), allFields)
	e = export(a, "/v1/loyalties/"+campID+"/members/"+bob+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	sameRows(t, "one card of a campaign", file(a, e["result"].(map[string]any)["url"].(string))[1:], expected(t, bobs, allFields), allFields)

	// What is refused, and why.
	for _, c := range []struct {
		path, detail string
		body         any
	}{
		{"/v1/loyalties/" + campID + "/transactions/export", `"status" is not a field`, map[string]any{"parameters": map[string]any{"fields": []string{"id", "status"}}}},
		{"/v1/loyalties/" + campID + "/transactions/export", "order", map[string]any{"order": "-amount"}},
		{"/v1/loyalties/" + campID + "/transactions/export", "parameters.filters.created_at.conditions.$in",
			map[string]any{"parameters": map[string]any{"filters": map[string]any{"created_at": map[string]any{"conditions": map[string]any{"$in": []string{"x"}}}}}}},
		{"/v1/loyalties/" + campID + "/transactions/export", "parameters.filters.created_at.conditions.$after",
			map[string]any{"parameters": map[string]any{"filters": map[string]any{"created_at": map[string]any{"conditions": map[string]any{"$after": "yesterday"}}}}}},
		{"/v1/loyalties/" + campID + "/transactions/export", `cannot filter by "amount"`,
			map[string]any{"parameters": map[string]any{"filters": map[string]any{"amount": map[string]any{"conditions": map[string]any{"$is": "5"}}}}}},
		{"/v1/loyalties/" + campID + "/transactions/export", "junction",
			map[string]any{"parameters": map[string]any{"filters": map[string]any{"junction": "or", "type": map[string]any{"conditions": map[string]any{"$is": "POINTS_REMOVAL"}}}}}},
		{"/v1/exports", `"api_log" cannot be exported`, map[string]any{"exported_object": "api_log"}},
		{"/v1/loyalties/" + campID + "/transactions/export", `"campaign_id" is not a field`, map[string]any{"parameters": map[string]any{"fields": []string{"campaign_id"}}}},
		{"/v1/exports", "exported_object: is required", map[string]any{}},
	} {
		m := a.Fails("POST", c.path, c.body, 400, "invalid_export_params")
		if !strings.Contains(m["details"].(string), c.detail) {
			t.Fatalf("%v: details %q do not name %q", c.body, m["details"], c.detail)
		}
	}
	a.Fails("POST", "/v1/loyalties/camp_nope/transactions/export", nil, 404, "not_found")
	a.Fails("POST", "/v1/loyalties/members/LC-NOPE/transactions/export", nil, 404, "not_found")
	a.Fails("POST", "/v1/loyalties/"+campID+"/transactions/export", "[1]", 400, "invalid_payload")

	// The export's events and its async action.
	if o := hooks.Wait(t, "export.completed", 1)["export"].(map[string]any); o["status"] != "DONE" || o["result"] == nil {
		t.Fatalf("export.completed: %v", o)
	}
	act := a.WaitAction(e["async_action_id"].(string))
	if act["type"] != "EXPORT.CSV" || act["progress"] != 100.0 || act["result"].(map[string]any)["export_id"] != e["id"] {
		t.Fatalf("async action: %v", act)
	}

	// The list: page-based with its total, newest first.
	l := a.OK("GET", "/v1/exports?limit=2", nil)
	if l["object"] != "list" || l["data_ref"] != "exports" || l["total"] != 9.0 || len(l["exports"].([]any)) != 2 ||
		l["exports"].([]any)[0].(map[string]any)["id"] != e["id"] {
		t.Fatalf("list: %v", l)
	}
	a.Fails("GET", "/v1/exports?order=size", nil, 400, "invalid_query_params")
}

func TestTheOtherObjectsExport(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Points", nil)["id"].(string)
	code := a.Member(campID, "cy")["code"].(string)
	d10 := a.E.Clock.Today().AddDate(0, 0, 10).Format(time.DateOnly)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 100, "expiration_type": "CUSTOM_DATE", "expiration_date": d10})
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 30, "expiration_type": "NON_EXPIRING"})
	cardID := a.OK("GET", "/v1/loyalties/members/"+code, nil)["id"].(string)

	e := export(a, "/v1/loyalties/"+campID+"/points-expiration/export", nil)
	recs := file(a, e["result"].(map[string]any)["url"].(string))
	want := [][]string{{"ID", "Campaign ID", "Voucher ID", "Status", "Expires At", "Points"},
		{"lopb_" + cardID + "_" + d10, campID, cardID, "ACTIVE", d10, "100"}}
	if !reflect.DeepEqual(recs, want) || e["exported_object"] != "points_expiration" {
		t.Fatalf("points expiration: %v, want %v", recs, want)
	}

	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-1", "status": "PAID", "amount": 1999, "customer": map[string]any{"source_id": "cy"}})
	a.OK("POST", "/v1/orders", map[string]any{"source_id": "o-2", "status": "CREATED", "amount": 5})
	e = export(a, "/v1/orders/export", map[string]any{"parameters": map[string]any{"fields": []string{"source_id", "status", "amount", "total_amount"}}})
	recs = file(a, e["result"].(map[string]any)["url"].(string))
	if !reflect.DeepEqual(recs, [][]string{{"Source ID", "Status", "Amount", "Total Amount"}, {"o-1", "PAID", "19.99", "19.99"}, {"o-2", "CREATED", "0.05", "0.05"}}) {
		t.Fatalf("orders: %v", recs)
	}
	e = export(a, "/v1/orders/export", nil)
	if recs = file(a, e["result"].(map[string]any)["url"].(string)); strings.Join(recs[0], ",") != "ID,Source ID,Status" || len(recs) != 3 {
		t.Fatalf("orders, default columns: %v", recs)
	}

	a.OK("POST", "/v1/customers", map[string]any{"source_id": "dee", "name": "Dee", "email": "dee@example.com",
		"address": map[string]any{"city": "Oslo"}, "metadata": map[string]any{"vip": true}})
	e = export(a, "/v1/exports", map[string]any{"exported_object": "customer", "parameters": map[string]any{
		"fields": []string{"source_id", "name", "email", "address_city", "metadata"}, "order": "-created_at"}})
	recs = file(a, e["result"].(map[string]any)["url"].(string))
	if !reflect.DeepEqual(recs[:2], [][]string{{"Source ID", "Name", "Email", "Address City", "Metadata"}, {"dee", "Dee", "dee@example.com", "Oslo", `{"vip": true}`}}) {
		t.Fatalf("customers: %v", recs)
	}
	e = export(a, "/v1/exports", map[string]any{"exported_object": "customer", "parameters": map[string]any{
		"filters": map[string]any{"source_id": map[string]any{"conditions": map[string]any{"$is": "dee"}}}}})
	if recs = file(a, e["result"].(map[string]any)["url"].(string)); !reflect.DeepEqual(recs, [][]string{{"Name", "Source ID"}, {"Dee", "dee"}}) {
		t.Fatalf("customers, filtered: %v", recs)
	}

	p := a.OK("POST", "/v1/products", map[string]any{"source_id": "shirt", "name": "Shirt", "price": 1999})
	a.OK("POST", "/v1/products/"+p["id"].(string)+"/skus", map[string]any{"source_id": "shirt-s", "sku": "S", "price": 2000, "currency": "EUR"})
	e = export(a, "/v1/exports", map[string]any{"exported_object": "product"})
	if recs = file(a, e["result"].(map[string]any)["url"].(string)); !reflect.DeepEqual(recs, [][]string{{"ID", "Source ID", "Name", "Price"}, {p["id"].(string), "shirt", "Shirt", "19.99"}}) {
		t.Fatalf("products: %v", recs)
	}
	e = export(a, "/v1/exports", map[string]any{"exported_object": "sku", "parameters": map[string]any{"fields": []string{"sku", "price", "currency", "product_id"}}})
	if recs = file(a, e["result"].(map[string]any)["url"].(string)); !reflect.DeepEqual(recs, [][]string{{"Sku", "Price", "Currency", "Product ID"}, {"S", "20.00", "EUR", p["id"].(string)}}) {
		t.Fatalf("skus: %v", recs)
	}
}

func TestALargeExportIsSplitIntoParts(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{ExportPartRows: 7})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	campID := a.Campaign("Parts", nil)["id"].(string)
	code := a.Member(campID, "pat")["code"].(string)
	for i := range 20 {
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": i + 1})
	}
	ex := export(a, "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	res := ex["result"].(map[string]any)
	urls := res["urls"].([]any)
	if len(urls) != 3 || res["url"] != urls[0] || res["rows"] != 20.0 || len(res["parts"].([]any)) != 3 ||
		res["parts"].([]any)[2].(map[string]any)["rows"] != 6.0 || !strings.HasSuffix(urls[2].(string), "&part=3") {
		t.Fatalf("parts: %v", res)
	}
	var rows [][]string
	for i, u := range urls {
		recs := file(a, u.(string))
		if strings.Join(recs[0], ",") != strings.Join(file(a, urls[0].(string))[0], ",") {
			t.Fatalf("part %d has no header row: %v", i+1, recs[0])
		}
		rows = append(rows, recs[1:]...)
	}
	sameRows(t, "all parts", rows, expected(t, a.History(code), allFields), allFields)
	r := get(a, urls[0].(string)+"&part=4", nil)
	if r.Status != 400 {
		t.Fatalf("a fourth part: %d %s", r.Status, r.Body)
	}
}

// Writes committed while an export runs are in the file all or not at
// all, as of one moment: a writer's additions, made one after another, are
// in it as a prefix, and the file's rows are exactly the snapshot's count.
func TestAnExportHoldsExactlyItsSnapshot(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	// Small chunks make the file take a few seconds, so writes fall inside.
	e := stacktest.Start(t, stacktest.Options{ExportChunkBytes: 512})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	campID := a.Campaign("Busy", nil)["id"].(string)
	card := a.Member(campID, "bee")
	code, cardID := card["code"].(string), card["id"].(string)
	// 30,000 earlier entries, written straight to the ledger so the file takes a while.
	pool := a.E.Stack.Regional["api"].Pool()
	if _, err := pool.Exec(context.Background(), `INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta,
		details, created_at) SELECT $1, 'lt_0000' || lpad(g::TEXT, 8, '0'), $2, $3, 'POINTS_ADDITION', 1,
		'{"balance": {"points": 1, "balance": 1}}', now() FROM generate_series(1, 30000) AS g`, a.P.ID, cardID, campID); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var mu sync.Mutex
	var written []string // the writer's entries, in commit order
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := a.Do("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1}); r.Status != 200 {
				t.Errorf("addition: %d %s", r.Status, r.Body)
				return
			}
			h := a.OK("GET", "/v1/loyalties/members/"+code+"/transactions?order=-id&limit=1", nil)["data"].([]any)
			mu.Lock()
			written = append(written, h[0].(map[string]any)["id"].(string))
			mu.Unlock()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	ex := a.OK("POST", "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": []string{"id"}}})
	ex = waitDone(a, ex["id"].(string))
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	recs := file(a, ex["result"].(map[string]any)["url"].(string))[1:]
	in := map[string]bool{}
	for _, r := range recs {
		if in[r[0]] {
			t.Fatalf("row %s twice", r[0])
		}
		in[r[0]] = true
	}
	if float64(len(recs)) != ex["result"].(map[string]any)["rows"] {
		t.Fatalf("%d rows in the file, the snapshot counted %v", len(recs), ex["result"])
	}
	k := 0
	for k < len(written) && in[written[k]] {
		k++
	}
	for _, id := range written[k:] {
		if in[id] {
			t.Fatalf("the file holds the writer's %s but not %s, written before it", id, written[k])
		}
	}
	if len(recs) != 30000+k {
		t.Fatalf("%d rows: 30,000 earlier and %d of the writer's", len(recs), k)
	}
	t.Logf("%d of the writer's %d additions are in the file", k, len(written))
	if k == 0 || k == len(written) {
		t.Fatalf("no write fell inside the export (%d of %d in the file): the test proved nothing", k, len(written))
	}
}

func TestDownloadsFromTheClustersHosts(t *testing.T) {
	t.Parallel()
	// Chunks of 700 bytes: the file spans many, as a large one does 256 KiB chunks.
	e := stacktest.Start(t, stacktest.Options{ExportChunkBytes: 700, Clusters: stacktest.AllClusters})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	us := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "us1")}
	campID := a.Campaign("Downloads", nil)["id"].(string)
	code := a.Member(campID, "dan")["code"].(string)
	for i := range 30 {
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": i + 1, "reason": strings.Repeat("r", i)})
	}
	ex := export(a, "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	id := ex["id"].(string)
	link := ex["result"].(map[string]any)["url"].(string)
	token := link[strings.Index(link, "token=")+len("token="):]
	sameRows(t, "a file of many chunks", file(a, link)[1:], expected(t, a.History(code), allFields), allFields)
	if n := countChunks(a, id); n < 10 {
		t.Fatalf("the file is in %d chunks", n)
	}
	whole := get(a, link, http.Header{"Accept-Encoding": {"identity"}})
	if whole.Status != 200 || whole.Header.Get("Content-Disposition") != `attachment; filename="`+id+`.csv"` ||
		whole.Header.Get("Content-Encoding") != "" || whole.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("token alone: %d %v", whole.Status, whole.Header)
	}
	api := "http://api.localhost/v1/exports/" + id
	dl := "http://download.localhost/v1/exports/" + id
	keys := a.P.Header()
	keys.Set("Accept-Encoding", "identity")
	for _, c := range []struct {
		name   string
		url    string
		header http.Header
		status int
		file   bool
	}{
		{"keys alone on the download host", dl, keys, 200, true},
		{"keys and token", dl + "?token=" + token, keys, 200, true},
		{"keys on the API host, asking for CSV", api, http.Header{"X-App-Id": keys["X-App-Id"], "X-App-Token": keys["X-App-Token"], "Accept": {"text/csv"}}, 200, true},
		{"token on the API host", api + "?token=" + token, nil, 200, true},
		{"keys on the API host: the export object", api, a.P.Header(), 200, false},
		{"neither", dl, nil, 401, false},
		{"a forged token", dl + "?token=" + token[:len(token)-2] + "xx", nil, 401, false},
		{"a token of another export", "http://download.localhost/v1/exports/exp_other?token=" + token, nil, 404, false},
		{"another project's keys", dl, other.P.Header(), 404, false},
		{"another project's keys and this token", dl + "?token=" + token, other.P.Header(), 404, false},
		{"the wrong cluster's download host", "http://us1.download.localhost/v1/exports/" + id + "?token=" + token, nil, 421, false},
		{"keys of a project in the wrong cluster", "http://us1.download.localhost/v1/exports/" + id, a.P.Header(), 421, false},
		{"another cluster's project on its own host", "http://us1.download.localhost/v1/exports/" + id, us.P.Header(), 404, false},
		{"anything else on a download host", "http://download.localhost/v1/loyalties", a.P.Header(), 404, false},
	} {
		r := get(a, c.url, c.header)
		if r.Status != c.status {
			t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
		}
		if c.status != 200 {
			if m := r.JSON(t); m["code"] != float64(c.status) {
				t.Fatalf("%s: %v", c.name, m)
			}
			continue
		}
		if c.file && !bytes.Equal(r.Body, whole.Body) {
			t.Fatalf("%s: another file (%d bytes, want %d)", c.name, len(r.Body), len(whole.Body))
		}
		if !c.file && r.JSON(t)["id"] != id {
			t.Fatalf("%s: %s", c.name, r.Body)
		}
	}

	// An OAuth token with the exports scope downloads too; one without it cannot.
	for scope, status := range map[string]int{"exports": 200, "customers": 403} {
		form := "grant_type=client_credentials&scope=" + scope
		h := a.P.Header()
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		tr := stacktest.Do(t, a.E.Client, "POST", "http://api.localhost/v1/oauth/token", h, form)
		if tr.Status != 200 {
			t.Fatalf("token: %d %s", tr.Status, tr.Body)
		}
		bearer := http.Header{"Authorization": {"Bearer " + tr.JSON(t)["access_token"].(string)}, "Accept-Encoding": {"identity"}}
		if r := get(a, dl, bearer); r.Status != status || (status == 200 && !bytes.Equal(r.Body, whole.Body)) {
			t.Fatalf("a Bearer token of scope %s: %d %s", scope, r.Status, r.Body)
		}
	}

	// A range resumes a download, across chunks too; gzip when asked for.
	r := get(a, link, http.Header{"Range": {"bytes=100-1999"}})
	if r.Status != 206 || !bytes.Equal(r.Body, whole.Body[100:2000]) ||
		r.Header.Get("Content-Range") != fmt.Sprintf("bytes 100-1999/%d", len(whole.Body)) {
		t.Fatalf("range: %d %v %q", r.Status, r.Header, r.Body)
	}
	// Many ranges are answered with the whole file (each would read a chunk).
	if r := get(a, link, http.Header{"Range": {"bytes=0-0,700-700,1400-1400"}, "Accept-Encoding": {"identity"}}); r.Status != 200 ||
		!bytes.Equal(r.Body, whole.Body) {
		t.Fatalf("many ranges: %d %v", r.Status, r.Header)
	}
	if r := get(a, link, http.Header{"Range": {fmt.Sprintf("bytes=%d-", len(whole.Body)+5)}}); r.Status != 416 ||
		r.JSON(t)["code"] != 416.0 {
		t.Fatalf("a range past the end: %d %s", r.Status, r.Body)
	}
	r = get(a, link, http.Header{"Range": {fmt.Sprintf("bytes=%d-", len(whole.Body)-10)}})
	if r.Status != 206 || !bytes.Equal(r.Body, whole.Body[len(whole.Body)-10:]) {
		t.Fatalf("the last bytes: %d %q", r.Status, r.Body)
	}
	r = get(a, link, http.Header{"Accept-Encoding": {"gzip"}})
	if r.Status != 200 || r.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip: %d %v", r.Status, r.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || !bytes.Equal(b, whole.Body) {
		t.Fatalf("gunzipped: %v, %d bytes of %d", err, len(b), len(whole.Body))
	}

	// A token signed for a moment already past is refused at the edge.
	past := dltoken.New(stacktest.Secret).Sign(a.P.ID, id, time.Now().Add(-time.Second))
	if r := get(a, dl+"?token="+past, nil); r.Status != 401 {
		t.Fatalf("a token past its expiry: %d %s", r.Status, r.Body)
	}
	// A client-side key, public by nature, neither downloads nor reaches
	// the application API.
	ck := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/api-keys", a.E.MgmtHeader(),
		map[string]any{"kind": "client"}).JSON(t)
	clientKeys := http.Header{"X-App-Id": {ck["app_id"].(string)}, "X-App-Token": {ck["app_token"].(string)}}
	for _, u := range []string{dl, api, "http://api.localhost/v1/customers"} {
		if r := get(a, u, clientKeys); r.Status != 401 {
			t.Fatalf("a client key on %s: %d %s", u, r.Status, r.Body)
		}
	}

	// The link expires; reading the export again gives a fresh one.
	a.E.Clock.Advance(2 * time.Hour)
	time.Sleep(50 * time.Millisecond)
	if r := get(a, link, nil); r.Status != 401 {
		t.Fatalf("an expired link: %d %s", r.Status, r.Body)
	}
	fresh := a.OK("GET", "/v1/exports/"+id, nil)["result"].(map[string]any)["url"].(string)
	if fresh == link {
		t.Fatal("the link was not renewed")
	}
	_ = fresh
}

// An export that cannot be made is ERROR with the reason in a field of its
// own, raises export.failed, and fails its async action.
func TestAFailedExportSaysWhy(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("export.failed")
	campID := a.Campaign("Broken", nil)["id"].(string)
	cardID := a.Member(campID, "bo")["id"].(string)
	// An entry whose balance is not a number: the export's SQL cannot read it.
	if _, err := a.E.Stack.Regional["api"].Pool().Exec(context.Background(), `INSERT INTO loyalty_transactions (project_id, id,
		card_id, campaign_id, type, delta, details, created_at) VALUES ($1, 'lt_broken', $2, $3, 'POINTS_ADDITION', 1,
		'{"balance": {"points": 1, "balance": "many"}}', now())`, a.P.ID, cardID, campID); err != nil {
		t.Fatal(err)
	}
	ex := a.OK("POST", "/v1/loyalties/"+campID+"/transactions/export", nil)
	var got map[string]any
	stacktest.Eventually(t, 20*time.Second, "the export to fail", func() bool {
		got = a.OK("GET", "/v1/exports/"+ex["id"].(string), nil)
		return got["status"] == "ERROR"
	})
	if got["result"] != nil || got["error"].(map[string]any)["code"] != "export_failed" || got["error"].(map[string]any)["message"] == "" {
		t.Fatalf("failed export: %v", got)
	}
	if o := hooks.Wait(t, "export.failed", 1)["export"].(map[string]any); o["id"] != ex["id"] || o["status"] != "ERROR" {
		t.Fatalf("export.failed: %v", o)
	}
	stacktest.Eventually(t, 10*time.Second, "the action to fail", func() bool {
		return a.OK("GET", "/v1/async-actions/"+ex["async_action_id"].(string), nil)["status"] == "FAILED"
	})
	r := get(a, "http://api.localhost/v1/exports/"+ex["id"].(string)+"?token=x", a.P.Header())
	if r.Status != 401 {
		t.Fatalf("a bad token with keys: %d %s", r.Status, r.Body)
	}
	h := a.P.Header()
	h.Set("Accept", "text/csv")
	if r := get(a, "http://api.localhost/v1/exports/"+ex["id"].(string), h); r.Status != 409 || r.JSON(t)["key"] != "export_not_ready" {
		t.Fatalf("the file of a failed export: %d %s", r.Status, r.Body)
	}
}

func countChunks(a stacktest.API, id string) int {
	a.T.Helper()
	var n int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM export_chunks WHERE export_id = $1`, id).Scan(&n); err != nil {
		a.T.Fatal(err)
	}
	return n
}

// An export with no rows is a file with its header row; parts that end
// exactly at the part size leave no empty part or chunk.
func TestEmptyAndExactlySplitExports(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{ExportPartRows: 7, ExportChunkBytes: 300})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	campID := a.Campaign("Empty", nil)["id"].(string)
	ex := export(a, "/v1/loyalties/"+campID+"/transactions/export", nil)
	if res := ex["result"].(map[string]any); res["rows"] != 0.0 || len(res["urls"].([]any)) != 1 {
		t.Fatalf("empty export: %v", res)
	}
	if recs := file(a, ex["result"].(map[string]any)["url"].(string)); len(recs) != 1 || recs[0][0] != "ID" {
		t.Fatalf("empty file: %v", recs)
	}
	code := a.Member(campID, "ed")["code"].(string)
	for i := range 14 {
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": i + 1})
	}
	ex = export(a, "/v1/loyalties/"+campID+"/transactions/export", map[string]any{"parameters": map[string]any{"fields": allFields}})
	res := ex["result"].(map[string]any)
	if len(res["urls"].([]any)) != 2 || res["rows"] != 14.0 {
		t.Fatalf("14 rows in parts of 7: %v", res)
	}
	var rows [][]string
	for _, u := range res["urls"].([]any) {
		rows = append(rows, file(a, u.(string))[1:]...)
	}
	sameRows(t, "two full parts", rows, expected(t, a.History(code), allFields), allFields)
	var empty int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM export_chunks WHERE export_id = $1 AND length(data) = 0`, ex["id"]).Scan(&empty); err != nil || empty != 0 {
		t.Fatalf("%d empty chunks (%v)", empty, err)
	}
}

func TestRetentionAndDelete(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	campID := a.Campaign("Kept", nil)["id"].(string)
	code := a.Member(campID, "kim")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 5})
	chunks := func(id string) int {
		var n int
		if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM export_chunks WHERE export_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := export(a, "/v1/loyalties/"+campID+"/transactions/export", nil)
	second := export(a, "/v1/loyalties/"+campID+"/transactions/export", nil)
	if first["expires_at"] == nil || chunks(first["id"].(string)) != 1 {
		t.Fatalf("export: %v", first)
	}
	other.Fails("GET", "/v1/exports/"+first["id"].(string), nil, 404, "not_found")
	other.Fails("DELETE", "/v1/exports/"+first["id"].(string), nil, 404, "not_found")
	if r := a.Do("DELETE", "/v1/exports/"+first["id"].(string), nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/exports/"+first["id"].(string), nil, 404, "not_found")
	if r := get(a, first["result"].(map[string]any)["url"].(string), nil); r.Status != 404 || chunks(first["id"].(string)) != 0 {
		t.Fatalf("a deleted export's file: %d, %d chunks", r.Status, chunks(first["id"].(string)))
	}
	a.Fails("DELETE", "/v1/exports/"+first["id"].(string), nil, 404, "not_found")

	a.E.Clock.Advance(29 * 24 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	a.OK("GET", "/v1/exports/"+second["id"].(string), nil)
	a.E.Clock.Advance(2 * 24 * time.Hour)
	stacktest.Eventually(t, 10*time.Second, "the retention sweep", func() bool {
		return a.Do("GET", "/v1/exports/"+second["id"].(string), nil).Status == 404
	})
	if n := chunks(second["id"].(string)); n != 0 {
		t.Fatalf("%d chunks left of an expired export", n)
	}
}
