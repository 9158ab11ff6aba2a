package bulk_test

import (
	"fmt"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func started(a stacktest.API, r stacktest.Resp) map[string]any {
	a.T.Helper()
	if r.Status != 202 {
		a.T.Fatalf("start: %d %s", r.Status, r.Body)
	}
	return a.WaitAction(r.JSON(a.T)["async_action_id"].(string))["result"].(map[string]any)
}

// Imports keep the good rows and report the bad ones: a code taken by
// another voucher, a code twice in the input, a bad discount.
func TestVoucherImportsJSONAndCSV(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/vouchers/TAKEN", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}})
	res := started(a, a.Do("POST", "/v1/vouchers/import", []any{
		map[string]any{"code": "IMP-1", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 15},
			"metadata": map[string]any{"src": "json"}, "redemption": map[string]any{"quantity": 3}},
		map[string]any{"code": "TAKEN", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}},
		map[string]any{"code": "IMP-1", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}},
		map[string]any{"code": "IMP-BAD", "type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT"}},
		map[string]any{"code": "IMP-GIFT", "gift": map[string]any{"amount": 900}},
	}))
	if res["done_count"] != 2.0 || res["failed_count"] != 3.0 {
		t.Fatalf("json import: %v", res)
	}
	if f := stacktest.FailedRows(res, "code"); f[2] != "TAKEN" || f[3] != "IMP-1" || f[4] != "IMP-BAD" {
		t.Fatalf("failures: %v", res["failed"])
	}
	v := a.OK("GET", "/v1/vouchers/IMP-1", nil)
	if v["discount"].(map[string]any)["percent_off"] != 15.0 || v["metadata"].(map[string]any)["src"] != "json" ||
		v["redemption"].(map[string]any)["quantity"] != 3.0 {
		t.Fatalf("imported: %v", v)
	}
	if g := a.OK("GET", "/v1/vouchers/IMP-GIFT", nil); g["type"] != "GIFT_VOUCHER" || g["gift"].(map[string]any)["balance"] != 900.0 {
		t.Fatalf("imported gift: %v", g)
	}
	csv := "Code,Discount Type,Value,Category,Redemption Limit,Active,Expiration Date,Shop\n" +
		"CSV-1,AMOUNT,250,summer,2,true,2030-01-01T00:00:00Z,north\n" +
		"CSV-2,PERCENT,12.5,,,false,,south\n" +
		"CSV-3,BOGUS,1,,,,,\n" +
		"TAKEN,AMOUNT,1,,,,,\n"
	res = started(a, a.UploadCSV("/v1/vouchers/importCSV", csv))
	if res["done_count"] != 2.0 || res["failed_count"] != 2.0 {
		t.Fatalf("csv import: %v", res)
	}
	c1 := a.OK("GET", "/v1/vouchers/CSV-1", nil)
	if c1["discount"].(map[string]any)["amount_off"] != 250.0 || c1["category"] != "summer" || c1["metadata"].(map[string]any)["Shop"] != "north" ||
		c1["expiration_date"] != "2030-01-01T00:00:00.000Z" || c1["redemption"].(map[string]any)["quantity"] != 2.0 {
		t.Fatalf("csv voucher: %v", c1)
	}
	if c2 := a.OK("GET", "/v1/vouchers/CSV-2", nil); c2["active"] != false || c2["discount"].(map[string]any)["percent_off"] != 12.5 {
		t.Fatalf("csv voucher 2: %v", c2)
	}
	for _, bad := range []string{"", "Discount Type,Value\nAMOUNT,1\n", "Code,Code\nA,B\n", "Code\n", "Code,\"unclosed\nx,\"y\n"} {
		if r := a.UploadCSV("/v1/vouchers/importCSV", bad); r.Status != 400 {
			t.Fatalf("bad csv %q: %d %s", bad, r.Status, r.Body)
		}
	}
	a.Fails("POST", "/v1/vouchers/import", map[string]any{"code": "x"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/import", []any{}, 400, "invalid_payload")
}

// A campaign's imports take its template, count in its vouchers, and stay
// in its project; bulk metadata updates reach every voucher named.
func TestCampaignImportsAndMetadataJobs(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Imported", "campaign_type": "GIFT_VOUCHERS", "vouchers_count": 0,
		"voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 1500}}})
	id := camp["id"].(string)
	res := started(a, a.Do("POST", "/v1/campaigns/"+id+"/import", []any{map[string]any{"code": "G-1", "metadata": map[string]any{"n": 1}},
		map[string]any{"code": "G-2"}, map[string]any{"code": "G-3", "type": "DISCOUNT_VOUCHER"}}))
	if res["done_count"] != 2.0 || stacktest.FailedRows(res, "code")[3] != "G-3" {
		t.Fatalf("campaign import: %v", res)
	}
	res = started(a, a.UploadCSV("/v1/campaigns/Imported/importCSV", "code,tier\nG-4,gold\nG-5,silver\n"))
	if res["done_count"] != 2.0 {
		t.Fatalf("campaign csv import: %v", res)
	}
	if c := a.OK("GET", "/v1/campaigns/"+id, nil); c["vouchers_count"] != 4.0 {
		t.Fatalf("vouchers_count: %v", c["vouchers_count"])
	}
	g := a.OK("GET", "/v1/vouchers/G-4", nil)
	if g["campaign_id"] != id || g["gift"].(map[string]any)["balance"] != 1500.0 || g["metadata"].(map[string]any)["tier"] != "gold" {
		t.Fatalf("campaign voucher: %v", g)
	}
	other.Fails("POST", "/v1/campaigns/"+id+"/import", []any{map[string]any{"code": "X"}}, 404, "not_found")
	res = started(a, a.Do("POST", "/v1/vouchers/bulk/async", []any{map[string]any{"code": "G-1", "metadata": map[string]any{"m": "x"}},
		map[string]any{"code": "NOPE", "metadata": map[string]any{"m": "y"}}}))
	if res["done_count"] != 1.0 || res["failed_count"] != 1.0 {
		t.Fatalf("bulk: %v", res)
	}
	// Its report lists each item's outcome, as the reference's
	// VOUCHERS.BULK_UPDATE result links one.
	if reports, _ := res["reports"].([]any); len(reports) != 1 || res["reports_available_till"] == nil {
		t.Fatalf("bulk's reports: %v", res)
	} else if f := a.E.Do(t, "GET", reports[0].(string), nil, nil); f.Status != 200 ||
		string(f.Body) != "row,code,status,reason\n1,G-1,SUCCESS,\n2,NOPE,FAILED,no voucher has this code\n" {
		t.Fatalf("bulk's report: %d %q", f.Status, f.Body)
	}
	if m := a.OK("GET", "/v1/vouchers/G-1", nil)["metadata"].(map[string]any); m["m"] != "x" || m["n"] != 1.0 {
		t.Fatalf("bulk metadata merged: %v", m)
	}
	codes := []string{}
	for i := 1; i <= 5; i++ {
		codes = append(codes, fmt.Sprintf("G-%d", i))
	}
	res = started(a, a.Do("POST", "/v1/vouchers/metadata/async", map[string]any{"codes": codes, "metadata": map[string]any{"lang": "en"}}))
	if res["done_count"] != 4.0 || res["failed_count"] != 1.0 || res["reports"] != nil {
		t.Fatalf("metadata async: %v", res)
	}
	if m := a.OK("GET", "/v1/vouchers/G-5", nil)["metadata"].(map[string]any); m["lang"] != "en" || m["tier"] != "silver" {
		t.Fatalf("metadata async: %v", m)
	}
	a.Fails("POST", "/v1/vouchers/metadata/async", map[string]any{"codes": []any{}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/bulk/async", []any{map[string]any{"code": "G-1"}}, 400, "invalid_payload")
}
