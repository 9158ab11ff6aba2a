package publications_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
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

// codesOf is a publication of several's codes, checked against its
// vouchers_id and the absence of one voucher.
func codesOf(t *testing.T, p map[string]any, n int) []string {
	t.Helper()
	cs, _ := p["vouchers"].([]any)
	ids, _ := p["vouchers_id"].([]any)
	if len(cs) != n || len(ids) != n || p["voucher"] != nil || p["object"] != "publication" || p["result"] != "SUCCESS" {
		t.Fatalf("a publication of %d: %v", n, p)
	}
	out := make([]string, n)
	for i, c := range cs {
		out[i] = c.(string)
	}
	return out
}

// campaign.count above 1: one publication gives that many vouchers, all or
// none, and answers their codes and ids.
func TestPublishingSeveralVouchersAtOnce(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("voucher.published", "publication.succeeded")
	campaign(a, "Bulk", "STATIC", 5, nil)
	p := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Bulk", "count": 3},
		"customer": map[string]any{"source_id": "ann"}})
	codes := codesOf(t, p, 3)
	seen := map[string]bool{}
	for i, code := range codes {
		v := a.OK("GET", "/v1/vouchers/"+code, nil)
		if v["holder_id"] != p["customer_id"] || v["id"] != p["vouchers_id"].([]any)[i] || seen[code] ||
			v["publish"].(map[string]any)["count"] != 1.0 {
			t.Fatalf("voucher %s: %v", code, v)
		}
		seen[code] = true
	}
	// The vouchers' reads count their publications; the two left count none.
	for _, x := range a.OK("GET", "/v1/vouchers?limit=10", nil)["vouchers"].([]any) {
		v := x.(map[string]any)
		if want := map[bool]float64{true: 1, false: 0}[seen[v["code"].(string)]]; v["publish"].(map[string]any)["count"] != want {
			t.Fatalf("listed %s: publish %v, want count %v", v["code"], v["publish"], want)
		}
	}
	// One publication in the list, with its codes; found by each of them.
	l := a.OK("GET", "/v1/publications?campaign=Bulk", nil)
	item := l["publications"].([]any)[0].(map[string]any)
	if l["total"] != 1.0 || item["id"] != p["id"] || len(item["vouchers"].([]any)) != 3 || item["voucher"] != nil {
		t.Fatalf("list: %v", l)
	}
	if l := a.OK("GET", "/v1/publications?voucher="+codes[2], nil); l["total"] != 1.0 {
		t.Fatalf("by its third code: %v", l)
	}
	// filters[voucher_code] sees every code of it: a positive condition
	// holds when one code satisfies it, a negative one when none does.
	for cond, want := range map[string]float64{
		"[$is]=" + codes[2]: 1, "[$in][0]=NOPE&filters[voucher_code][conditions][$in][1]=" + codes[1]: 1,
		"[$is]=NOPE": 0, "[$is_not]=" + codes[0]: 0, "[$is_not]=NOPE": 1, "[$not_in][0]=" + codes[2]: 0,
		"[$has_value]=": 1, "[$is_unknown]=": 0, "[$contains]=" + codes[1][1:]: 1, "[$not_contain]=" + codes[1][1:]: 0,
	} {
		l := a.OK("GET", "/v1/publications?filters[voucher_code][conditions]"+cond, nil)
		if l["total"] != want || len(l["publications"].([]any)) != int(want) {
			t.Errorf("filters[voucher_code][conditions]%s: %v publications, want %v", cond, l["total"], want)
		}
	}
	for i := 0; i < 3; i++ {
		hooks.Wait(t, "voucher.published", i+1)
	}
	if n := hooks.Count("voucher.published"); n != 3 {
		t.Fatalf("voucher.published %d times", n)
	}

	// Two left, three asked: 400, recorded as a failure, and nothing given.
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Bulk", "count": 3},
		"customer": map[string]any{"source_id": "bob"}}, 400, "no_voucher_suitable_for_publication")
	free := 0
	for _, v := range a.OK("GET", "/v1/vouchers?campaign=Bulk&limit=100", nil)["vouchers"].([]any) {
		if v.(map[string]any)["holder_id"] == nil {
			free++
		}
	}
	if free != 2 {
		t.Fatalf("%d vouchers free after the refused publication, want 2", free)
	}
	if l := a.OK("GET", "/v1/publications?result=FAILURE", nil); l["total"] != 1.0 {
		t.Fatalf("failures: %v", l)
	}
	// The failure gave no code: a negative condition on the code does not
	// hold for it (as for any field without a value), $is_unknown does.
	for cond, want := range map[string]float64{"[$is_not]=NOPE": 1, "[$not_in][0]=NOPE": 1, "[$not_contain]=NOPE": 1, "[$is_unknown]=": 1} {
		l := a.OK("GET", "/v1/publications?filters[voucher_code][conditions]"+cond, nil)
		if l["total"] != want {
			t.Errorf("after the failure, filters[voucher_code][conditions]%s: %v publications, want %v", cond, l["total"], want)
		}
	}
	if l := a.OK("GET", "/v1/publications?result=SUCCESS", nil); l["total"] != 1.0 {
		t.Fatalf("successes: %v", l)
	}
	// The last two, to bob.
	codesOf(t, a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Bulk", "count": 2},
		"customer": map[string]any{"source_id": "bob"}}), 2)

	// AUTO_UPDATE: the missing vouchers are made.
	campaign(a, "Grow", "AUTO_UPDATE", 1, nil)
	grown := codesOf(t, a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Grow", "count": 4},
		"customer": map[string]any{"source_id": "cid"}}), 4)
	if l := a.OK("GET", "/v1/vouchers?campaign=Grow&limit=100", nil); len(l["vouchers"].([]any)) != 4 || len(grown) != 4 {
		t.Fatalf("AUTO_UPDATE vouchers: %v", l)
	}
	// The legacy GET form takes campaign[count].
	codesOf(t, a.OK("GET", "/v1/publications/create?campaign[name]=Grow&campaign[count]=2&customer[source_id]=dee", nil), 2)

	// Refused: out of 1-50, with a source_id (one voucher per source_id),
	// on a join_once campaign.
	for _, n := range []int{0, 51} {
		a.Fails("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Grow", "count": n},
			"customer": map[string]any{"source_id": "eve"}}, 400, "invalid_payload")
	}
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Grow", "count": 2},
		"customer": map[string]any{"source_id": "eve"}, "source_id": "s-1"}, 400, "invalid_payload")
	campaign(a, "Once", "AUTO_UPDATE", 1, map[string]any{"join_once": true})
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Once", "count": 2},
		"customer": map[string]any{"source_id": "eve"}}, 400, "invalid_payload")
	a.Fails("POST", "/v1/publications?join_once=true", map[string]any{"campaign": map[string]any{"name": "Grow", "count": 2},
		"customer": map[string]any{"source_id": "eve"}}, 400, "invalid_payload")
	// Refused before anything was written: eve was not even stored.
	a.Fails("GET", "/v1/customers/eve", nil, 404, "not_found")
	if held := a.OK("GET", "/v1/publications?filters[tracking_id][conditions][$in]=eve", nil); held["total"] != 0.0 {
		t.Fatalf("eve's publications after refusals: %v", held)
	}
}

// Every version answers a publication of several as the publication: it
// has no one voucher for versions before v2017-04-20 to answer.
func TestSeveralVouchersInEveryVersion(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campaign(a, "Old", "STATIC", 6, nil)
	for _, version := range []string{"v2017-04-05", "v2017-04-20", "v2018-08-01"} {
		h := a.P.Header()
		h.Set("X-Voucherify-API-Version", version)
		r := stacktest.Do(t, a.E.Client, "POST", stacktest.URL(a.P.Cluster, "/v1/publications"), h,
			map[string]any{"campaign": map[string]any{"name": "Old", "count": 2}, "customer": map[string]any{"source_id": version}})
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", version, r.Status, r.Body)
		}
		codesOf(t, r.JSON(t), 2)
	}
}

// A loyalty program's card through /v1/publications, as its members join:
// one card per customer (the program is join_once), the card a member
// already holds, and the card itself for versions before v2017-04-20.
func TestPublishingALoyaltyProgramGivesOneCard(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("voucher.published")
	prog := a.Campaign("Club", map[string]any{"type": "AUTO_UPDATE"})
	p := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Club", "customer": map[string]any{"source_id": "ann"}})
	card := voucherOf(t, p)
	if card["type"] != "LOYALTY_CARD" || card["holder_id"] != p["customer_id"] || card["campaign_id"] != prog["id"] ||
		p["vouchers_id"].([]any)[0] != card["id"] {
		t.Fatalf("publication: %v", p)
	}
	again := a.OK("POST", "/v1/publications", map[string]any{"campaign": prog["id"], "customer": p["customer_id"]})
	if again["id"] != p["id"] || voucherOf(t, again)["code"] != card["code"] {
		t.Fatalf("published again: %v", again)
	}
	members := a.OK("GET", "/v1/loyalties/"+prog["id"].(string)+"/members", nil)["vouchers"].([]any)
	held := 0
	for _, m := range members {
		if m.(map[string]any)["holder_id"] == p["customer_id"] {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("ann holds %d cards: %v", held, members)
	}
	// A member who joined first gets their card.
	joined := a.Member("Club", "bob")
	if pb := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Club", "customer": map[string]any{"source_id": "bob"}}); voucherOf(t, pb)["code"] != joined["code"] {
		t.Fatalf("bob's publication: %v, joined with %v", pb, joined["code"])
	}
	a.Fails("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Club", "count": 2},
		"customer": map[string]any{"source_id": "cid"}}, 400, "invalid_payload")
	l := a.OK("GET", "/v1/publications?voucher_type=loyalty", nil)
	if l["total"] != 2.0 {
		t.Fatalf("loyalty publications: %v", l)
	}
	for _, it := range l["publications"].([]any) {
		if v := it.(map[string]any)["voucher"].(map[string]any); v["campaign"] != "Club" || v["loyalty_card"] == nil {
			t.Fatalf("a loyalty publication listed: %v", it)
		}
	}
	// voucher.published once for ann's card (by the join), once for bob's.
	hooks.Wait(t, "voucher.published", 2)
	time.Sleep(200 * time.Millisecond)
	if n := hooks.Count("voucher.published"); n != 2 {
		t.Fatalf("voucher.published %d times", n)
	}
	h := a.P.Header()
	h.Set("X-Voucherify-API-Version", "v2017-04-05")
	r := stacktest.Do(t, a.E.Client, "POST", stacktest.URL(a.P.Cluster, "/v1/publications"), h,
		map[string]any{"campaign": "Club", "customer": map[string]any{"source_id": "ann"}})
	if v := r.JSON(t); r.Status != 200 || v["object"] != "voucher" || v["code"] != card["code"] {
		t.Fatalf("v2017-04-05: %d %v", r.Status, v)
	}
}

// Tally's expiration_date on a publication makes the vouchers given
// expire then (one or several), never later than they already would; the
// vouchers read back with it and a validation after it is refused. A date
// in the past, before the voucher's start, or for a loyalty program is 400
// and gives nothing.
func TestPublishingWithAnExpirationDate(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campaign(a, "Soon", "STATIC", 5, nil)
	at := a.E.Clock.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	first := map[string]any{"campaign": "Soon", "customer": map[string]any{"source_id": "ann"}, "source_id": "pub-ann",
		"expiration_date": at.Format(time.RFC3339Nano)}
	p := a.OK("POST", "/v1/publications", first)
	code := voucherOf(t, p)["code"].(string)
	if got := voucherOf(t, p)["expiration_date"]; got != at.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("the publication's voucher expires %v, want %v", got, at)
	}
	if got := a.OK("GET", "/v1/vouchers/"+code, nil)["expiration_date"]; got != at.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("read back: expiration_date %v, want %v", got, at)
	}
	// Several at once: each of them.
	later := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	many := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Soon", "count": 2},
		"customer": map[string]any{"source_id": "bob"}, "expiration_date": later.Format(time.RFC3339Nano)})
	for _, c := range codesOf(t, many, 2) {
		if got := a.OK("GET", "/v1/vouchers/"+c, nil)["expiration_date"]; got != later.Format("2006-01-02T15:04:05.000Z") {
			t.Fatalf("voucher %s of several: expiration_date %v", c, got)
		}
	}
	// Never later than the voucher's own.
	own := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Millisecond)
	a.OK("POST", "/v1/vouchers/OWN-1", map[string]any{"type": "DISCOUNT_VOUCHER", "expiration_date": own.Format(time.RFC3339Nano),
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}})
	a.OK("POST", "/v1/publications", map[string]any{"voucher": "OWN-1", "customer": map[string]any{"source_id": "cy"},
		"expiration_date": own.Add(time.Hour).Format(time.RFC3339Nano)})
	if got := a.OK("GET", "/v1/vouchers/OWN-1", nil)["expiration_date"]; got != own.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("a later expiration_date lengthened the voucher's life: %v, want %v", got, own)
	}
	// Refusals give nothing.
	a.OK("POST", "/v1/vouchers/LATE-START", map[string]any{"type": "DISCOUNT_VOUCHER",
		"start_date": time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339), "discount": map[string]any{"type": "AMOUNT", "amount_off": 100}})
	a.Campaign("Club", nil)
	for _, body := range []map[string]any{
		{"voucher": "LATE-START", "expiration_date": later.Format(time.RFC3339)},
		{"campaign": "Soon", "expiration_date": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)},
		{"campaign": "Club", "expiration_date": later.Format(time.RFC3339)},
		{"campaign": "Soon", "expiration_date": "soon"},
	} {
		body["customer"] = map[string]any{"source_id": "dee"}
		if r := a.Do("POST", "/v1/publications", body); r.Status != 400 {
			t.Errorf("%v: %d %s, want 400", body, r.Status, r.Body)
		}
	}
	if v := a.OK("GET", "/v1/vouchers/LATE-START", nil); v["holder_id"] != nil || v["expiration_date"] != nil {
		t.Fatalf("a refused publication changed the voucher: %v", v)
	}
	// Publishing again a voucher the customer holds cannot shorten it.
	a.Fails("POST", "/v1/publications", map[string]any{"voucher": "OWN-1", "customer": map[string]any{"source_id": "cy"},
		"expiration_date": later.Format(time.RFC3339Nano)}, 400, "invalid_payload")
	if got := a.OK("GET", "/v1/vouchers/OWN-1", nil)["expiration_date"]; got != own.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("a publication of a held voucher changed it: %v", got)
	}
	// Once past, the voucher is refused; the first request sent again
	// (its source_id) answers its publication, unchanged.
	a.E.Clock.Advance(2 * time.Hour)
	if again := a.OK("POST", "/v1/publications", first); again["id"] != p["id"] {
		t.Fatalf("the publication asked again: %v, want %v", again["id"], p["id"])
	}
	v := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
		"customer": map[string]any{"source_id": "ann"}, "order": map[string]any{"amount": 1000}})
	if v["valid"] != false {
		t.Fatalf("a voucher past the expiration its publication set: %v", v)
	}
}
