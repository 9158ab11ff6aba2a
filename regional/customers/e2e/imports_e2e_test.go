package e2e_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// upload posts file as the multipart field field of path.
func upload(a stacktest.API, path, field string, file []byte) stacktest.Resp {
	a.T.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	f, err := w.CreateFormFile(field, "customers.csv")
	if err != nil {
		a.T.Fatal(err)
	}
	f.Write(file)
	w.Close()
	h := a.P.Header()
	h.Set("Content-Type", w.FormDataContentType())
	return a.E.Do(a.T, "POST", stacktest.URL(a.P.Cluster, path), h, body.Bytes())
}

// finished waits for the job a 202 started and returns its action.
func finished(a stacktest.API, r stacktest.Resp) map[string]any {
	a.T.Helper()
	if r.Status != 202 {
		a.T.Fatalf("start: %d %s", r.Status, r.Body)
	}
	act := a.WaitAction(r.JSON(a.T)["async_action_id"].(string))
	if act["progress"] != 100.0 {
		a.T.Fatalf("a DONE action's progress: %v", act)
	}
	return act
}

// A 10,000-row import of which 3 rows are bad keeps the 9,997 others and
// reports the 3 by row and line; a source_id known before is overwritten,
// its metadata too.
func TestCustomerImportCSV(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "c-00001", "name": "Old", "phone": "+1",
		"metadata": map[string]any{"old": "yes"}})
	var csv strings.Builder
	csv.WriteString("\xef\xbb\xbfSource_id,Name,Email,Birthdate,City,Address_Postal_Code,metadata.tier,Shoe_size,vip\n")
	bad := map[int]string{100: "birthdate", 5000: "width", 9000: "quote"}
	for i := 1; i <= 10000; i++ {
		switch bad[i] {
		case "birthdate":
			fmt.Fprintf(&csv, "c-%05d,N %d,c%d@example.com,31/12/1990,Oslo,0150,gold,42,true\n", i, i, i)
		case "width":
			fmt.Fprintf(&csv, "c-%05d,N %d\n", i, i)
		case "quote":
			fmt.Fprintf(&csv, "c-%05d,N \"%d\",c%d@example.com,,,,,,\n", i, i, i)
		default:
			fmt.Fprintf(&csv, "c-%05d,N %d,c%d@example.com,1990-01-%02d,Oslo,0150,gold,42,true\n", i, i, i, i%28+1)
		}
	}
	act := finished(a, upload(a, "/v1/customers/importCSV", "file", []byte(csv.String())))
	res := act["result"].(map[string]any)
	if act["type"] != "CUSTOMERS.IMPORT_CSV" || res["done_count"] != 9997.0 || res["failed_count"] != 3.0 ||
		res["message"] != "9997 customer(s) imported successfully, 3 failed." {
		t.Fatalf("import: %v", act)
	}
	got := map[float64]float64{}
	for _, f := range res["failed"].([]any) {
		m := f.(map[string]any)
		got[m["row"].(float64)] = m["line"].(float64)
		if m["reason"] == "" {
			t.Fatalf("a failure without its reason: %v", m)
		}
	}
	if len(got) != 3 || got[100] != 101 || got[5000] != 5001 || got[9000] != 9001 {
		t.Fatalf("failed rows (row: line): %v", res["failed"])
	}
	// A known source_id is overwritten whole, as the reference does: the
	// phone the file has no column for is cleared, and any column that is
	// not a standard one is a metadata key (true, false and null typed).
	c := a.OK("GET", "/v1/customers/c-00001", nil)
	if c["name"] != "N 1" || c["phone"] != nil || c["email"] != "c1@example.com" || c["birthdate"] != "1990-01-02" ||
		c["address"].(map[string]any)["postal_code"] != "0150" || fmt.Sprint(c["metadata"]) != "map[Shoe_size:42 tier:gold vip:true]" {
		t.Fatalf("an imported known source_id: %v", c)
	}
	if c := a.OK("GET", "/v1/customers/c-09999", nil); c["address"].(map[string]any)["city"] != "Oslo" || c["created_at"] == nil {
		t.Fatalf("an imported customer: %v", c)
	}
	a.Fails("GET", "/v1/customers/c-05000", nil, 404, "not_found")
	if l := a.OK("GET", "/v1/customers?limit=1", nil); l["total"] != 9997.0 {
		t.Fatalf("customers after the import: %v", l["total"])
	}
}

// Bulk updates upsert by source_id through a single write's path (its
// notices), and the metadata update merges its keys into each customer's.
func TestCustomerBulkUpdates(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.updated", "customer.created")
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "b-1", "name": "Ann", "metadata": map[string]any{"a": 1}})
	act := finished(a, a.Do("POST", "/v1/customers/bulk/async", []any{
		map[string]any{"source_id": "b-1", "name": "Anne", "address": map[string]any{"city": "Bergen"}},
		map[string]any{"source_id": "b-2", "email": "b2@example.com", "metadata": map[string]any{"x": "y"}},
	}))
	if res := act["result"].(map[string]any); act["type"] != "CUSTOMERS.BULK_UPDATE" || res["done_count"] != 2.0 || res["failed_count"] != 0.0 {
		t.Fatalf("bulk: %v", act)
	}
	if c := a.OK("GET", "/v1/customers/b-1", nil); c["name"] != "Anne" || c["address"].(map[string]any)["city"] != "Bergen" ||
		c["metadata"].(map[string]any)["a"] != 1.0 {
		t.Fatalf("bulk updated: %v", c)
	}
	if c := a.OK("GET", "/v1/customers/b-2", nil); c["email"] != "b2@example.com" {
		t.Fatalf("bulk created: %v", c)
	}
	hooks.Wait(t, "customer.updated", 1)
	hooks.Wait(t, "customer.created", 2)

	act = finished(a, a.Do("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": []string{"b-1", "b-2", "b-3"},
		"metadata": map[string]any{"lang": "en"}}))
	if res := act["result"].(map[string]any); res["done_count"] != 3.0 || res["failed_count"] != 0.0 {
		t.Fatalf("metadata: %v", act)
	}
	if m := a.OK("GET", "/v1/customers/b-1", nil)["metadata"].(map[string]any); m["a"] != 1.0 || m["lang"] != "en" {
		t.Fatalf("metadata merged: %v", m)
	}
	if m := a.OK("GET", "/v1/customers/b-3", nil)["metadata"].(map[string]any); m["lang"] != "en" {
		t.Fatalf("metadata upserted: %v", m)
	}
	hooks.Wait(t, "customer.updated", 3)

	a.Fails("POST", "/v1/customers/bulk/async", []any{}, 400, "invalid_payload")
	a.Fails("POST", "/v1/customers/bulk/async", []any{map[string]any{"name": "no source"}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/customers/bulk/async", []any{map[string]any{"source_id": "b-1", "birthdate": "soon"}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/customers/bulk/async", map[string]any{"source_id": "b-1"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": []string{}, "metadata": map[string]any{}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/customers/metadata/async", map[string]any{"source_ids": []string{"b-1"}}, 400, "invalid_payload")
}

// A file the import cannot take is the request's 4xx, before any job.
func TestCustomerImportRefusals(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for name, r := range map[string]stacktest.Resp{
		"no file":       upload(a, "/v1/customers/importCSV", "other", []byte("Source_id\nx\n")),
		"not multipart": a.Do("POST", "/v1/customers/importCSV", map[string]any{"file": "Source_id\nx\n"}),
		"empty":         upload(a, "/v1/customers/importCSV", "file", nil),
		"not CSV":       upload(a, "/v1/customers/importCSV", "file", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")),
		"empty column":  upload(a, "/v1/customers/importCSV", "file", []byte("Source_id,,Name\nx,42,n\n")),
		"column twice":  upload(a, "/v1/customers/importCSV", "file", []byte("City,Address_City\nx,y\n")),
	} {
		if r.Status != 400 || !strings.Contains(string(r.Body), "invalid_payload") {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	big := []byte("Source_id,Name\n" + strings.Repeat("s,"+strings.Repeat("n", 1000)+"\n", 11<<10))
	if r := upload(a, "/v1/customers/importCSV", "file", big); r.Status != 413 {
		t.Errorf("too big: %d %s", r.Status, r.Body)
	}
	if l := a.OK("GET", "/v1/async-actions", nil); len(l["async_actions"].([]any)) != 0 {
		t.Errorf("a refused import started a job: %v", l)
	}
}
