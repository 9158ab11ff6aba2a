package publications_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// campaign makes a discount campaign of n vouchers (typ STATIC or
// AUTO_UPDATE) and waits for them.
func campaign(a stacktest.API, name, typ string, n int, extra map[string]any) map[string]any {
	a.T.Helper()
	body := map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS", "type": typ, "vouchers_count": n,
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500},
			"code_config": map[string]any{"pattern": strings.ToUpper(name[:3]) + "-######"}}}
	for k, v := range extra {
		body[k] = v
	}
	c := a.OK("POST", "/v1/campaigns", body)
	if id, ok := c["async_action_id"].(string); ok {
		a.WaitAction(id)
	}
	return c
}

func voucherOf(t *testing.T, pub map[string]any) map[string]any {
	t.Helper()
	v, ok := pub["voucher"].(map[string]any)
	if !ok {
		t.Fatalf("no voucher: %v", pub)
	}
	return v
}

func TestPublishToNewAndExistingCustomers(t *testing.T) {
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("publication.succeeded", "customer.publication.succeeded", "publication.failed", "voucher.published")
	camp := campaign(a, "Spring", "STATIC", 3, nil)

	// A new customer, by source_id: made, and given a voucher.
	p := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Spring"},
		"customer": map[string]any{"source_id": "ann", "email": "ann@example.com"}, "metadata": map[string]any{"k": "v"}, "channel": "Email"})
	v := voucherOf(t, p)
	if !strings.HasPrefix(p["id"].(string), "pub_") || p["object"] != "publication" || p["result"] != "SUCCESS" ||
		p["tracking_id"] != "ann" || p["channel"] != "Email" || p["metadata"].(map[string]any)["k"] != "v" ||
		p["customer"].(map[string]any)["email"] != "ann@example.com" || v["holder_id"] != p["customer_id"] ||
		v["campaign_id"] != camp["id"] || !strings.HasPrefix(v["code"].(string), "SPR-") ||
		v["publish"].(map[string]any)["count"] != 1.0 || p["vouchers_id"].([]any)[0] != v["id"] {
		t.Fatalf("publication: %v", p)
	}
	if got := a.OK("GET", "/v1/vouchers/"+v["code"].(string), nil); got["holder_id"] != p["customer_id"] {
		t.Fatalf("the voucher's holder: %v", got)
	}
	cust := a.OK("GET", "/v1/customers/ann", nil)
	if cust["id"] != p["customer_id"] {
		t.Fatalf("customer: %v", cust)
	}

	// An existing customer, by id (as a string and as an object), by the
	// campaign's id: another voucher each time (the campaign is not join_once).
	p2 := a.OK("POST", "/v1/publications", map[string]any{"campaign": camp["id"], "customer": cust["id"]})
	p3 := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Spring", "customer": map[string]any{"id": cust["id"]}})
	codes := map[any]bool{v["code"]: true, voucherOf(t, p2)["code"]: true, voucherOf(t, p3)["code"]: true}
	if len(codes) != 3 || p2["customer_id"] != cust["id"] || p2["channel"] != "API" {
		t.Fatalf("publications: %v %v", p2, p3)
	}

	// A voucher by its code, to its holder again: fine; to another: 400.
	a.OK("POST", "/v1/publications", map[string]any{"voucher": v["code"], "customer": map[string]any{"source_id": "ann"}})
	a.Fails("POST", "/v1/publications", map[string]any{"voucher": v["code"], "customer": map[string]any{"source_id": "bob"}},
		400, "voucher_already_published")

	// No free voucher left: 400 with the reference's key, recorded as a failure.
	e := a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Spring", "customer": map[string]any{"source_id": "cid"}},
		400, "no_voucher_suitable_for_publication")
	if !strings.Contains(e["details"].(string), "Spring") {
		t.Fatalf("error: %v", e)
	}
	failed := a.OK("GET", "/v1/publications?result=FAILURE", nil)
	if failed["total"] != 1.0 || failed["publications"].([]any)[0].(map[string]any)["failure_code"] != "no_voucher_suitable_for_publication" {
		t.Fatalf("failures: %v", failed)
	}

	// A source_id is one publication: the same answer again.
	s1 := a.OK("POST", "/v1/publications", map[string]any{"voucher": voucherOf(t, p2)["code"], "customer": cust["id"], "source_id": "req-1"})
	s2 := a.OK("POST", "/v1/publications", map[string]any{"voucher": voucherOf(t, p2)["code"], "customer": cust["id"], "source_id": "req-1"})
	if s1["id"] != s2["id"] || s2["source_id"] != "req-1" {
		t.Fatalf("source_id: %v %v", s1, s2)
	}

	// Bad requests name what is wrong.
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Spring"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/publications", map[string]any{"customer": cust["id"]}, 400, "invalid_payload")
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Nope", "customer": cust["id"]}, 404, "not_found")
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Spring", "customer": "cust_nobody"}, 404, "not_found")

	if hooks.Wait(t, "publication.succeeded", 5)["object"] != "publication" {
		t.Fatal("publication.succeeded")
	}
	ev := hooks.Wait(t, "customer.publication.succeeded", 5)
	if ev["customer"].(map[string]any)["id"] != cust["id"] || ev["publication"] == nil {
		t.Fatalf("customer.publication.succeeded: %v", ev)
	}
	if hooks.Wait(t, "publication.failed", 1)["result"] != "FAILURE" {
		t.Fatal("publication.failed")
	}
	if ev := hooks.Wait(t, "voucher.published", 5); ev["voucher"].(map[string]any)["code"] != voucherOf(t, s1)["code"] || ev["customer"] == nil {
		t.Fatalf("voucher.published: %v", ev)
	}
}

func TestJoinOnceGivesTheSamePublicationAgain(t *testing.T) {
	a := stacktest.NewAPI(t)
	campaign(a, "Welcome", "AUTO_UPDATE", 1, map[string]any{"join_once": true})
	first := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Welcome", "customer": map[string]any{"source_id": "dee"}})
	again := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Welcome", "customer": map[string]any{"source_id": "dee"}})
	if first["id"] != again["id"] || voucherOf(t, first)["code"] != voucherOf(t, again)["code"] {
		t.Fatalf("join_once: %v then %v", first, again)
	}
	// AUTO_UPDATE: another customer gets a voucher made for them.
	other := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Welcome", "customer": map[string]any{"source_id": "eve"}})
	if voucherOf(t, other)["code"] == voucherOf(t, first)["code"] {
		t.Fatalf("a second customer got the first's voucher: %v", other)
	}

	// join_once as a query parameter, on a campaign that is not.
	campaign(a, "Open", "AUTO_UPDATE", 1, nil)
	q1 := a.OK("POST", "/v1/publications?join_once=true", map[string]any{"campaign": "Open", "customer": map[string]any{"source_id": "dee"}})
	q2 := a.OK("POST", "/v1/publications?join_once=true", map[string]any{"campaign": "Open", "customer": map[string]any{"source_id": "dee"}})
	q3 := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Open", "customer": map[string]any{"source_id": "dee"}})
	if q1["id"] != q2["id"] || q3["id"] == q1["id"] {
		t.Fatalf("join_once parameter: %v %v %v", q1["id"], q2["id"], q3["id"])
	}
}

func TestAnotherProjectsCampaignIsNotFound(t *testing.T) {
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	camp := campaign(other, "Theirs", "STATIC", 2, nil)
	v := other.OK("GET", "/v1/vouchers?campaign_id="+camp["id"].(string), nil)["vouchers"].([]any)[0].(map[string]any)
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": camp["id"], "customer": map[string]any{"source_id": "x"}}, 404, "not_found")
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Theirs", "customer": map[string]any{"source_id": "x"}}, 404, "not_found")
	a.Fails("POST", "/v1/publications", map[string]any{"voucher": v["code"], "customer": map[string]any{"source_id": "x"}}, 404, "not_found")
	other.OK("POST", "/v1/publications", map[string]any{"campaign": "Theirs", "customer": map[string]any{"source_id": "x"}})
	if l := a.OK("GET", "/v1/publications", nil); l["total"] != 0.0 {
		t.Fatalf("another project's publications listed: %v", l)
	}
}

func TestListAndTheLegacyGetForm(t *testing.T) {
	a := stacktest.NewAPI(t)
	campaign(a, "Autumn", "STATIC", 5, nil)
	campaign(a, "Winter", "STATIC", 2, nil)
	q := url.Values{"campaign[name]": {"Autumn"}, "customer[source_id]": {"fay"}, "customer[name]": {"Fay"},
		"customer[metadata][tier]": {"gold"}, "metadata[via]": {"link"}, "channel": {"Link"}}
	legacy := a.OK("GET", "/v1/publications/create?"+q.Encode(), nil)
	if legacy["object"] != "publication" || legacy["tracking_id"] != "fay" || legacy["channel"] != "Link" ||
		legacy["metadata"].(map[string]any)["via"] != "link" || legacy["customer"].(map[string]any)["name"] != "Fay" ||
		voucherOf(t, legacy)["campaign"] != "Autumn" {
		t.Fatalf("legacy GET: %v", legacy)
	}
	if c := a.OK("GET", "/v1/customers/fay", nil); c["metadata"].(map[string]any)["tier"] != "gold" {
		t.Fatalf("legacy GET's customer: %v", c)
	}
	a.OK("GET", "/v1/publications/create?campaign=Winter&customer[source_id]=gus", nil)
	a.OK("POST", "/v1/publications", map[string]any{"campaign": "Autumn", "customer": map[string]any{"source_id": "gus"}})
	a.Fails("GET", "/v1/publications/create?campaign[name]=Autumn", nil, 400, "invalid_payload")

	all := a.OK("GET", "/v1/publications", nil)
	if all["object"] != "list" || all["data_ref"] != "publications" || all["total"] != 3.0 {
		t.Fatalf("list: %v", all)
	}
	first := all["publications"].([]any)[0].(map[string]any) // newest first
	if first["tracking_id"] != "gus" || first["customer"].(map[string]any)["source_id"] != "gus" ||
		first["voucher"].(map[string]any)["campaign"] != "Autumn" || first["voucher"].(map[string]any)["discount"] == nil {
		t.Fatalf("list item: %v", first)
	}
	gus := first["customer_id"].(string)
	for query, want := range map[string]float64{
		"campaign=Autumn": 2, "campaign=Winter": 1, "customer=" + gus: 2, "voucher=" + first["voucher"].(map[string]any)["code"].(string): 1,
		"result=SUCCESS": 3, "result=FAILURE": 0, "voucher_type=discount": 3, "voucher_type=loyalty": 0, "is_referral_code=true": 0,
		"filters[tracking_id][conditions][$in]=fay": 1, "filters[channel][conditions][$is]=API": 2,
	} {
		if l := a.OK("GET", "/v1/publications?"+query, nil); l["total"] != want {
			t.Fatalf("%s: %v, want %v", query, l["total"], want)
		}
	}
	// Paging by the cursor, in the orders the reference lists.
	seen := map[any]bool{}
	after := ""
	for range 3 {
		p := "/v1/publications?limit=1&order=created_at"
		if after != "" {
			p += "&starting_after_id=" + after
		}
		l := a.OK("GET", p, nil)
		item := l["publications"].([]any)[0].(map[string]any)
		seen[item["id"]] = true
		after = item["id"].(string)
	}
	if len(seen) != 3 {
		t.Fatalf("pages: %v", seen)
	}
	a.OK("GET", "/v1/publications?order=-tracking_id&limit=2&page=1", nil)
	a.Fails("GET", "/v1/publications?order=nope", nil, 400, "invalid_query_params")
	a.Fails("GET", "/v1/publications?result=MAYBE", nil, 400, "invalid_query_params")
}

// Requests of v2017-04-05 get the bare voucher, as before the publication
// object (v2017-04-20); errors are the same in every version.
func TestVersion20170405AnswersTheVoucher(t *testing.T) {
	a := stacktest.NewAPI(t)
	campaign(a, "Legacy", "STATIC", 3, nil)
	// Sent without the conformance recorder: the reference describes the newest shape.
	do := func(method, path string, body any) (int, map[string]any) {
		h := a.P.Header()
		h.Set("X-Voucherify-API-Version", "v2017-04-05")
		r := stacktest.Do(t, a.E.Client, method, stacktest.URL(a.P.Cluster, path), h, body)
		return r.Status, r.JSON(t)
	}
	status, v := do("POST", "/v1/publications", map[string]any{"campaign": "Legacy", "customer": map[string]any{"source_id": "hal"}})
	if status != 200 || v["object"] != "voucher" || !strings.HasPrefix(v["code"].(string), "LEG-") || v["holder_id"] == nil || v["customer"] != nil {
		t.Fatalf("v2017-04-05: %d %v", status, v)
	}
	status, v = do("GET", "/v1/publications/create?campaign=Legacy&customer[source_id]=hal", nil)
	if status != 200 || v["object"] != "voucher" {
		t.Fatalf("v2017-04-05 legacy GET: %d %v", status, v)
	}
	if status, e := do("POST", "/v1/publications", map[string]any{"campaign": "Nope", "customer": "x"}); status != 404 || e["key"] != "not_found" {
		t.Fatalf("v2017-04-05 error: %d %v", status, e)
	}
	if status, l := do("GET", "/v1/publications", nil); status != 200 || l["total"] != 2.0 {
		t.Fatalf("v2017-04-05 list: %d %v", status, l)
	}
	// v2017-04-20 and the project's own (newest) version: the publication.
	h := a.P.Header()
	h.Set("X-Voucherify-API-Version", "v2017-04-20")
	r := stacktest.Do(t, a.E.Client, "POST", stacktest.URL(a.P.Cluster, "/v1/publications"), h,
		map[string]any{"campaign": "Legacy", "customer": map[string]any{"source_id": "hal"}})
	if p := r.JSON(t); r.Status != 200 || p["object"] != "publication" || r.Header.Get("X-Voucherify-API-Version") != "v2017-04-20" {
		t.Fatalf("v2017-04-20: %d %v", r.Status, p)
	}
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": "Legacy", "customer": "x"}, 404, "not_found") // an unknown customer id
}

// 16 customers publishing one campaign at once get 16 distinct vouchers.
func TestConcurrentPublicationsTakeDistinctVouchers(t *testing.T) {
	a := stacktest.NewAPI(t)
	camp := campaign(a, "Rush", "STATIC", 20, nil)
	const n = 16
	var wg sync.WaitGroup
	codes := make([]string, n)
	errs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.Do("POST", "/v1/publications", map[string]any{"campaign": "Rush",
				"customer": map[string]any{"source_id": fmt.Sprintf("rush-%d", i)}})
			if r.Status != http.StatusOK {
				errs[i] = fmt.Sprintf("%d %s", r.Status, r.Body)
				return
			}
			var m map[string]any
			m = r.JSON(t)
			codes[i], _ = m["voucher"].(map[string]any)["code"].(string)
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != "" {
			t.Fatalf("publication %d: %s", i, errs[i])
		}
		if seen[codes[i]] {
			t.Fatalf("voucher %s given twice: %v", codes[i], codes)
		}
		seen[codes[i]] = true
	}
	held := a.OK("GET", "/v1/vouchers?campaign_id="+camp["id"].(string)+"&limit=100", nil)["vouchers"].([]any)
	holders := map[any]bool{}
	for _, v := range held {
		if h := v.(map[string]any)["holder_id"]; h != nil {
			if holders[h] {
				t.Fatalf("a customer holds two vouchers: %v", h)
			}
			holders[h] = true
		}
	}
	if len(holders) != n {
		t.Fatalf("%d vouchers held, want %d", len(holders), n)
	}
	if l := a.OK("GET", "/v1/publications?campaign=Rush", nil); l["total"] != float64(n) {
		t.Fatalf("publications: %v", l["total"])
	}
}
