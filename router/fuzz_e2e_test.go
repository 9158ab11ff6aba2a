package router_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The HTTP fuzz test's size: make test runs a bounded sample; a longer run is
// go test ./router -run TestFuzzEveryRoute -fuzzhttp.n 20000.
var (
	fuzzN    = flag.Int("fuzzhttp.n", 1200, "requests the HTTP fuzz test sends")
	fuzzSeed = flag.Uint64("fuzzhttp.seed", 0, "seed of the HTTP fuzz test (0: from the clock)")
)

// fuzzOrigin is the website the client-side routes are called from.
const fuzzOrigin = "https://fuzz.example"

// fuzzRoute is a registered route and who may call it.
type fuzzRoute struct {
	method, path string
	mgmt         bool
}

// TestFuzzEveryRoute walks every registered route of the regional and
// management services, through the router, with malformed JSON, wrong
// types, numbers out of range, NUL bytes, invalid UTF-8, huge strings, deep
// nesting, unknown enum values, bad path ids and bad query parameters, then
// reads back every list. Any 5xx, any error body that is not JSON and any
// answer slower than 5 s fails it.
func TestFuzzEveryRoute(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	ids := seedObjects(t, a)
	// The client-side routes are walked with the client keys from a
	// trusted origin, every toggle on and no per-address limit in the way.
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+a.P.ID, e.MgmtHeader(), map[string]any{
		"client_trusted_domains": []string{fuzzOrigin}, "client_ip_rate_limit": map[string]any{"requests": 100000, "seconds": 1},
		"client_publish_enabled": true, "client_list_vouchers_enabled": true, "client_create_customer_enabled": true,
		"client_loyalty_events_enabled": true, "client_redeem_enabled": true}); r.Status != 200 {
		t.Fatalf("client-side settings: %d %s", r.Status, r.Body)
	}
	headerFor := func(r fuzzRoute) http.Header {
		switch {
		case r.mgmt:
			return e.MgmtHeader()
		case strings.HasPrefix(r.path, "/client/"):
			return a.P.ClientHeader(fuzzOrigin)
		}
		return a.P.Header()
	}
	// The management routes work on a project of their own: one of them
	// deletes it.
	ids["projectId"] = e.CreateProject(t, "api").ID
	// A metadata schema of each project: the management routes' own, and
	// the application's customer schema, so fuzzed metadata meets it.
	for _, p := range []string{ids["projectId"], a.P.ID} {
		r := e.Do(t, "POST", "http://api.localhost/management/v1/projects/"+p+"/metadata-schemas", e.MgmtHeader(),
			map[string]any{"related_object": "customer", "properties": map[string]any{
				"tier":   map[string]any{"type": "string", "eq": []any{"gold", "silver"}, "max_length": 10},
				"visits": map[string]any{"type": "number", "array": true, "gte": 0},
				"home":   map[string]any{"type": "object", "object_type": "address"}}})
		if r.Status != 200 {
			t.Fatalf("metadata schema: %d %s", r.Status, r.Body)
		}
		if p == ids["projectId"] {
			ids["metadataSchemaId"] = r.JSON(t)["id"].(string)
		}
	}
	ids["resource"] = "customer"
	// A project user of the management routes' project (their :userId),
	// invited pending, so the credential route issues one once.
	if r := e.Do(t, "POST", "http://api.localhost/management/v1/projects/users/invite", e.MgmtHeader(),
		map[string]any{"email": "fuzz@example.com", "projects": map[string]any{ids["projectId"]: "VIEWER"}}); r.Status != 204 {
		t.Fatalf("invite: %d %s", r.Status, r.Body)
	}
	r := e.Do(t, "GET", "http://api.localhost/management/v1/projects/"+ids["projectId"]+"/users", e.MgmtHeader(), nil)
	ids["userId"] = r.JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)

	var routes []fuzzRoute
	add := func(h http.Handler, mgmt bool) {
		for _, r := range h.(*echo.Echo).Routes() {
			// The internal routes answer the management service only; the
			// management routes that reach them are walked instead.
			if r.Method == echo.RouteNotFound || strings.HasSuffix(r.Path, "/*") || r.Path == "/healthz" || r.Path == "/readyz" ||
				strings.HasPrefix(r.Path, "/internal/") {
				continue
			}
			routes = append(routes, fuzzRoute{r.Method, r.Path, mgmt})
		}
	}
	add(e.Stack.Regional["api"].Handler(), false)
	add(e.Stack.Management.Handler(), true)
	sort.Slice(routes, func(i, j int) bool { return routes[i].method+routes[i].path < routes[j].method+routes[j].path })
	if len(routes) < 60 {
		t.Fatalf("only %d routes registered", len(routes))
	}

	seed := *fuzzSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%d routes, %d requests, -fuzzhttp.seed %d", len(routes), *fuzzN, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	failures := 0
	statuses := map[int]int{}
	send := func(r fuzzRoute, path string, body []byte, ctype string) {
		t.Helper()
		header := headerFor(r)
		if ctype != "" {
			header.Set("Content-Type", ctype)
		}
		// One request in eight names an API version: known, unknown or garbage.
		if rng.IntN(8) == 0 {
			header.Set("X-Voucherify-API-Version", []string{"v2017-04-05", "v2017-04-20", "v2018-08-01", "v2099-01-01", "",
				"v2018-08-01; DROP TABLE projects", strings.Repeat("v", 5000), "\xff\xfe"}[rng.IntN(8)])
		}
		status, ct, got, d := fuzzDo(t, e, r.method, stacktest.URL("api", path), header, body)
		statuses[status]++
		bad := ""
		switch {
		case status >= 500:
			bad = "a 5xx"
		case d > 5*time.Second:
			bad = fmt.Sprintf("an answer after %v", d)
		case status >= 400 && r.method != http.MethodHead && (!strings.HasPrefix(ct, "application/json") || !json.Valid(got)):
			bad = "an error body that is not JSON"
		}
		if bad != "" {
			failures++
			if failures <= 25 {
				t.Errorf("%s %s %s: %s: %d %s", r.method, path, clipBody(body), bad, status, clipBody(got))
			}
		}
	}
	for i := 0; i < *fuzzN; i++ {
		r := routes[rng.IntN(len(routes))]
		path := fuzzPath(rng, r.path, ids)
		var body []byte
		if r.method == http.MethodPost || r.method == http.MethodPut || r.method == http.MethodPatch {
			body = fuzzBody(rng)
		}
		send(r, path, body, "")
	}
	// The file imports (customers', products', vouchers') take multipart
	// bodies, which the JSON bodies above never reach past: each also gets
	// files that are not CSV, bad headers, bad rows and broken multipart.
	for _, r := range routes {
		if !strings.HasSuffix(r.path, "/importCSV") {
			continue
		}
		for i := 0; i < 12; i++ {
			body, ctype := fuzzMultipart(rng)
			send(r, fuzzPath(rng, r.path, ids), body, ctype)
		}
	}

	// The JSON imports (orders', vouchers') take arrays of objects, which
	// the bodies above reach one time in ten: each also gets arrays of
	// mistyped objects, some past the reference's 2,000 a request.
	for _, r := range routes {
		if r.method != http.MethodPost || !strings.HasSuffix(r.path, "/import") {
			continue
		}
		for i := 0; i < 12; i++ {
			items := make([]string, []int{1, 3, 2001}[rng.IntN(3)])
			for j := range items {
				items[j] = fuzzObject(rng)
			}
			send(r, fuzzPath(rng, r.path, ids), []byte("["+strings.Join(items, ",")+"]"), "")
		}
	}

	// A template's copy reaches two clusters' internal routes only past its
	// body's checks: it gets a real template of the application's project
	// and destinations known, unknown and mistyped, with weird names.
	copyRoute := fuzzRoute{http.MethodPost, "/management/v1/projects/:projectId/templates/campaigns/:campaignTemplateId/copy", true}
	for i := 0; i < 24; i++ {
		dest := []string{`"` + a.P.ID + `"`, `"` + ids["projectId"] + `"`, `"proj_none"`, weird[rng.IntN(len(weird))]}[rng.IntN(4)]
		body := `{"name":` + weird[rng.IntN(len(weird))] + `,"destination_project_id":` + dest + `,"description":` + weird[rng.IntN(len(weird))] + `}`
		if rng.IntN(3) == 0 {
			body = fmt.Sprintf(`{"name":"Fuzz copy %d","destination_project_id":%s}`, i, dest)
		}
		send(copyRoute, "/management/v1/projects/"+a.P.ID+"/templates/campaigns/"+ids["campaignTemplateId"]+"/copy", []byte(body), "")
	}

	// A segment's filter is a language of its own: it gets filters of known
	// and unknown paths and operators with weird values.
	for i := 0; i < 60; i++ {
		send(fuzzRoute{http.MethodPost, "/v1/segments", false}, "/v1/segments", fuzzFilter(rng), "")
	}

	// Every list is asked for numbered pages: past its rows, the deepest
	// the reference allows (the largest OFFSET), one past it, and with the
	// cursor too.
	for _, r := range routes {
		if r.method != http.MethodGet {
			continue
		}
		for _, q := range pageQueries {
			send(r, fillPath(r.path, ids)+"?"+q, nil, "")
		}
	}

	// Every list still reads, and the region still serves.
	for _, r := range routes {
		if r.method != http.MethodGet {
			continue
		}
		path := fillPath(r.path, ids)
		header := headerFor(r)
		status, _, got, _ := fuzzDo(t, e, http.MethodGet, stacktest.URL("api", path), header, nil)
		if status >= 500 {
			t.Errorf("read back GET %s: %d %s", path, status, clipBody(got))
		}
	}
	t.Logf("answers by status: %v", statuses)
	if failures > 25 {
		t.Errorf("… and %d more failures", failures-25)
	}
}

func fuzzDo(t *testing.T, e *stacktest.Env, method, url string, header http.Header, body []byte) (int, string, []byte, time.Duration) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 400, "application/json", []byte("{}"), 0 // a URL no client could send
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (did the platform crash?)", method, url, err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Content-Type"), got, time.Since(start)
}

// seedObjects makes one object of each kind, so that fuzzed requests also
// reach past the lookup of their path ids.
func seedObjects(t *testing.T, a stacktest.API) map[string]string {
	ids := map[string]string{"name": "api"}
	camp := a.OK("POST", "/v1/loyalties", map[string]any{"name": "Fuzz", "vouchers_count": 1,
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}})
	ids["campaignId"] = camp["id"].(string)
	m := a.OK("POST", "/v1/loyalties/"+ids["campaignId"]+"/members", map[string]any{"customer": map[string]any{"source_id": "fuzz"}})
	ids["memberId"] = m["code"].(string)
	ids["customerId"] = "fuzz"
	a.OK("POST", "/v1/loyalties/members/"+ids["memberId"]+"/balance", map[string]any{"points": 1000})
	ids["productId"] = a.OK("POST", "/v1/products", map[string]any{"name": "Fuzz product", "source_id": "fuzzp"})["id"].(string)
	ids["skuId"] = a.OK("POST", "/v1/products/"+ids["productId"]+"/skus", map[string]any{"sku": "S", "source_id": "fuzzs"})["id"].(string)
	ids["rewardId"] = a.OK("POST", "/v1/rewards", map[string]any{"name": "Fuzz reward", "parameters": map[string]any{"product": map[string]any{"id": ids["productId"]}}})["id"].(string)
	ids["orderId"] = a.OK("POST", "/v1/orders", map[string]any{"source_id": "fuzzo", "amount": 100, "customer": map[string]any{"source_id": "fuzz"}})["id"].(string)
	var rules []map[string]any
	// The earning rule names a validation rule and has every validity
	// window, so that the routes read and rewrite them (issue 38).
	ids["validationRuleId"] = a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Fuzz rule",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []int{50}}}, "logic": "1"}})["id"].(string)
	if r := a.Do("POST", "/v1/loyalties/"+ids["campaignId"]+"/earning-rules", []map[string]any{{"event": "order.paid",
		"loyalty": map[string]any{"type": "FIXED", "points": 1}, "validation_rule_id": ids["validationRuleId"],
		"validity_timeframe": map[string]any{"interval": "P2D", "duration": "PT1H"}, "validity_day_of_week": []int{1, 3},
		"validity_hours": map[string]any{"daily": []map[string]any{{"start_time": "10:00", "expiration_time": "12:00", "days_of_week": []int{1}}}}}}); r.Status != 200 || json.Unmarshal(r.Body, &rules) != nil {
		t.Fatalf("rule: %d %s", r.Status, r.Body)
	} else {
		ids["ruleId"] = rules[0]["id"].(string)
	}
	as := a.OK("POST", "/v1/loyalties/"+ids["campaignId"]+"/rewards", []map[string]any{{"reward": ids["rewardId"],
		"parameters": map[string]any{"loyalty": map[string]any{"points": 10}}}})
	ids["assignmentId"] = as["id"].(string)
	// A tier mapping the rule and the reward, so that its views read both.
	var ts []map[string]any
	if r := a.Do("POST", "/v1/loyalties/"+ids["campaignId"]+"/tiers", []map[string]any{{"name": "Fuzz tier", "points": map[string]any{"from": 0, "to": 1999},
		"earning_rules": map[string]any{ids["ruleId"]: map[string]any{"type": "MULTIPLY", "multiplier": 2}},
		"rewards":       map[string]any{ids["rewardId"]: map[string]any{"type": "CUSTOM", "points": 3}}}}); r.Status != 200 || json.Unmarshal(r.Body, &ts) != nil {
		t.Fatalf("tier: %d %s", r.Status, r.Body)
	}
	ids["tierId"] = ts[0]["id"].(string)
	// A tier above it and a rule on joining that, so that the fuzzed
	// balance changes may move the card and earn through a tier event.
	var top []map[string]any
	if r := a.Do("POST", "/v1/loyalties/"+ids["campaignId"]+"/tiers", []map[string]any{{"name": "Fuzz top",
		"points": map[string]any{"from": 2000}}}); r.Status != 200 || json.Unmarshal(r.Body, &top) != nil {
		t.Fatalf("top tier: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/v1/loyalties/"+ids["campaignId"]+"/earning-rules", []map[string]any{{"event": "customer.loyalty.tier.joined",
		"loyalty": map[string]any{"type": "FIXED", "points": 5}, "loyalty_tier": map[string]any{"id": top[0]["id"]}}}); r.Status != 200 {
		t.Fatalf("tier rule: %d %s", r.Status, r.Body)
	}
	// A CAMPAIGN reward the card can buy (points in another program), so
	// that the member's rewards and the reward routes read one of each kind.
	other := a.OK("POST", "/v1/loyalties", map[string]any{"name": "Fuzz other", "vouchers_count": 0,
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}})
	cr := a.OK("POST", "/v1/rewards", map[string]any{"name": "Fuzz miles", "parameters": map[string]any{"campaign": map[string]any{
		"id": other["id"], "balance": 5}}})
	a.OK("POST", "/v1/rewards/"+cr["id"].(string)+"/assignments", map[string]any{"campaign": ids["campaignId"],
		"parameters": map[string]any{"loyalty": map[string]any{"points": 10}}})
	a.OK("POST", "/v1/loyalties/members/"+ids["memberId"]+"/redemption", map[string]any{"reward": map[string]any{"id": cr["id"]}})
	ids["locationId"] = a.OK("POST", "/v1/locations", map[string]any{"name": "Fuzz area", "shape": map[string]any{"type": "circle",
		"distance": map[string]any{"center": "geo:52.2297,21.0122", "radius": "1 km"}}})["id"].(string)
	ids["productCollectionId"] = a.OK("POST", "/v1/product-collections", map[string]any{"name": "Fuzz collection",
		"products": []any{map[string]any{"id": ids["productId"], "object": "product"}}})["id"].(string)
	// An export (its routes' :id), made before the redemption below.
	ids["id"] = a.OK("POST", "/v1/loyalties/"+ids["campaignId"]+"/transactions/export", nil)["id"].(string)
	red := a.OK("POST", "/v1/loyalties/members/"+ids["memberId"]+"/redemption", map[string]any{"reward": map[string]any{"id": ids["rewardId"]}})
	if rid, ok := red["id"].(string); ok {
		ids["redemptionId"] = rid
	}
	// A filter segment (its routes' :segmentId, the customers list's
	// segment_id), and the filters its creation's fuzzed bodies vary.
	// Its filter names the location, so that every fuzzed customer write
	// is evaluated with its shape (bounding box and refinement), and a
	// count of events, so that every fuzzed write and event loads counts.
	ids["segmentId"] = a.OK("POST", "/v1/segments", map[string]any{"name": "Fuzz", "type": "auto-update",
		"filter": map[string]any{"junction": "or", "metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}},
			"events.purchase.count": map[string]any{"conditions": map[string]any{"$count_more": []any{2}}},
			"metadata.geo":          map[string]any{"conditions": map[string]any{"$in_location": []any{ids["locationId"]}}}}})["id"].(string)
	// A dynamic collection on the location, for the collection routes'
	// listings beside the static one.
	a.OK("POST", "/v1/product-collections", map[string]any{"name": "Fuzz area's products", "type": "AUTO_UPDATE",
		"filter": map[string]any{"metadata.geo": map[string]any{"conditions": map[string]any{"$in_location": []any{ids["locationId"]}}}}})
	// A campaign template (its routes' :campaignTemplateId), of a discount
	// campaign, so setups made from it are fuzzed past the template's read.
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Fuzz codes", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 5}}})
	ids["campaignTemplateId"] = a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Fuzz template",
		"campaign_id": "Fuzz codes"})["id"].(string)
	// A redeemed voucher (the routes' :code): its redemption history has
	// an entry to read.
	a.Voucher("FUZZ10", stacktest.PercentOff(10))
	a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "FUZZ10"}},
		"order": stacktest.Order([2]int{1000, 1})})
	ids["code"] = "FUZZ10"
	return ids
}

// fillPath puts the seeded object ids into a route's parameters.
func fillPath(route string, ids map[string]string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			v, ok := ids[p[1:]]
			if !ok {
				v = "x_" + p[1:]
			}
			parts[i] = v
		}
	}
	return strings.Join(parts, "/")
}

var badIDs = []string{"%00", "a%00b", "%ff", "%c0%ae", "%ed%a0%80", strings.Repeat("x", 5000), "..", "%2e%2e%2f",
	"'%20OR%201=1--", "%25", "0", "-1", "null", "%7B%7D", "a%0Ab", "%F0%9F%98%80"}

var badQueries = []string{"limit=-1", "limit=0", "limit=abc", "limit=1e400", "limit=99999999999999999999", "page=-5",
	"page=1e400", "page=0", "page=2", "page=99&limit=100", "page=100&limit=100", "page=101", "page=2&starting_after_id=x",
	"page=2&limit=1&order=-created_at", "order=bogus", "order=-", "starting_after_id=%00", "starting_after_id=%ff", "starting_after=%c0%ae",
	"filters[x][conditions][$is]=%00", "filters[created_at][conditions][$after]=notadate", "campaign_id=%ff",
	"customer=%00", "segment_id=%00", "segment_id=seg_none", "filters[type][conditions][$in][0]=static", "ids=%ff", "status=BOGUS", "limit=10&limit=20", "expand=%00", "created_at[before]=%ff", strings.Repeat("a=b&", 500),
	// Metadata filters (the customers list's, written into its SQL as literals): quotes, backslashes, odd keys.
	"filters[metadata.tier][conditions][$is]=x%27%3B--", "filters[metadata.a%27b\\][$is]=%5C%27", "filters[metadata.][$is]=x",
	"filters[metadata.n][$in][]=1e400&filters[metadata.n][$in][]=true", "filters[metadata.tier][$contains]=g"}

var pageQueries = []string{"page=2", "page=2&limit=1", "page=99&limit=100", "page=100&limit=100", "page=101",
	"page=2&starting_after_id=x"}

// fuzzPath fills a route's parameters, one of them (sometimes) badly, and
// (sometimes) adds a bad query.
func fuzzPath(rng *rand.Rand, route string, ids map[string]string) string {
	parts := strings.Split(route, "/")
	var params []int
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			params = append(params, i)
		}
	}
	path := fillPath(route, ids)
	if len(params) > 0 && rng.IntN(3) > 0 {
		ps := strings.Split(path, "/")
		ps[params[rng.IntN(len(params))]] = badIDs[rng.IntN(len(badIDs))]
		path = strings.Join(ps, "/")
	}
	if rng.IntN(2) == 0 {
		path += "?" + badQueries[rng.IntN(len(badQueries))]
	}
	return path
}

var fieldNames = []string{"name", "source_id", "metadata", "points", "type", "status", "amount", "items", "customer",
	"event", "loyalty", "parameters", "stock", "voucher", "vouchers_count", "reward", "code", "expiration_type",
	"expiration_date", "start_date", "reason", "loyalty_tier", "pending_points", "active", "price", "attributes",
	"product_id", "sku", "referrer_id", "customer_id", "order", "url", "events", "region", "kind", "api_host",
	"upstream_url", "plan", "limits", "description", "email", "phone", "address", "birthdate", "points_from",
	"validity_timeframe", "validity_day_of_week", "validity_hours", "custom_event", "source", "earning_rules",
	"rewards", "assignment", "quantity", "discount_amount", "initial_amount", "image_url", "currency", "source_ids", "codes", "shape",
	"filter", "customers", "junction", "conditions", "metadata.tier", "address.city", "birthdate", "created_at", "products",
	"related_object", "properties", "allow_defined_only", "campaign_id", "promotion_tier_id", "role", "login", "projects", "first_name", "brand", "contact",
	"validation_rule_id", "daily", "interval", "duration", "start_time", "expiration_time", "days_of_week"}

var weird = []string{`null`, `-1`, `0`, `1.5`, `1e308`, `1e400`, `-1e400`, `123456789012345678901234567890`, `""`,
	`"a\u0000b"`, `"\ud800"`, "\"\xff\xfe\"", "\"\xc0\xae\"", `"BOGUS"`, `"2026-13-45T99:99:99Z"`, `true`, `[]`, `{}`,
	`[null]`, `{"a":1e400}`, `["x", 1e400]`, `{"id":"%00"}`, `{"id":"x","type":"BOGUS"}`, `-9223372036854775809`,
	`9223372036854775808`, `"` + strings.Repeat("x", 200_000) + `"`}

// fuzzBody is a malformed, mistyped or mischievous JSON body.
func fuzzBody(rng *rand.Rand) []byte {
	switch rng.IntN(10) {
	case 0:
		return []byte([]string{`{`, `{"a":}`, `[1,`, `nul`, ``, `{"a":1}{"b":2}`, "\xff", `{"a":"\x00"}`, `"str"`, `42`,
			`{"a":1,"a":2}`, `{'a':1}`}[rng.IntN(12)])
	case 1:
		depth := []int{70, 1000, 20000}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			return []byte(`{"metadata":` + strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`)
		}
		return []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
	case 2: // a list body (earning rules, tiers, transfers, assignments)
		return []byte(`[` + fuzzObject(rng) + `]`)
	default:
		return []byte(fuzzObject(rng))
	}
}

// fuzzMultipart is an imported file's body: a multipart form whose file
// is no CSV, a bad header, bad rows, or is missing, or a broken form; and
// its Content-Type.
func fuzzMultipart(rng *rand.Rand) ([]byte, string) {
	headers := []string{"Source_id,Name,Email", "name,source_id,price", "code,value", "product_id,source_id", "", "\xff\xfe",
		"Source_id,Source_id", "metadata.,x", "\"unclosed,a", strings.Repeat("c,", 3000) + "c", "Source_id,metadata.a b"}
	rows := []string{"a,b,c", "\"x\",\"y", "\x00,\x00,\x00", "a\"b,c,d", strings.Repeat("x", 70_000), "1,2", ",,,,,,,,,", "s,n,e@x,1990-13-45"}
	var file strings.Builder
	file.WriteString(headers[rng.IntN(len(headers))] + "\n")
	for n := rng.IntN(6); n > 0; n-- {
		file.WriteString(rows[rng.IntN(len(rows))] + "\n")
	}
	const boundary = "fuzzboundary"
	field := []string{"file", "file", "file", "other"}[rng.IntN(4)]
	body := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + field + "\"; filename=\"f.csv\"\r\n\r\n" +
		file.String() + "\r\n--" + boundary + "--\r\n"
	switch rng.IntN(6) {
	case 0: // cut short
		body = body[:rng.IntN(len(body))]
	case 1: // a boundary the header does not announce
		return []byte(body), "multipart/form-data; boundary=other"
	case 2:
		return []byte(body), "multipart/form-data"
	}
	return []byte(body), "multipart/form-data; boundary=" + boundary
}

func fuzzObject(rng *rand.Rand) string {
	n := 1 + rng.IntN(5)
	fields := make([]string, 0, n)
	for i := 0; i < n; i++ {
		name := fieldNames[rng.IntN(len(fieldNames))]
		v := weird[rng.IntN(len(weird))]
		if rng.IntN(4) == 0 { // nested one level, where most typed objects are
			v = `{"` + fieldNames[rng.IntN(len(fieldNames))] + `":` + weird[rng.IntN(len(weird))] + `}`
		}
		fields = append(fields, `"`+name+`":`+v)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

var filterPaths = []string{"name", "email", "birthdate", "created_at", "updated_at", "address.city", "metadata.tier", "metadata.",
	"metadata", "bogus", "", "events.x.count", "events.purchase.count", "events.x", "events..count", "events.x.count.y"}

var filterOps = []string{"$is", "$in", "$not_in", "$contains", "$starts_with", "$more_than", "$less_than_equal", "$after",
	"$before", "$is_days_ago", "$more_than_ago", "$less_than_future", "$has_value", "$is_unknown", "$count_more", "$count", "$count_less", "$in_location", "$bogus", ""}

// fuzzFilter is a segment body whose filter mixes paths, operators and
// values, known and not.
func fuzzFilter(rng *rand.Rand) []byte {
	f := map[string]any{}
	for range rng.IntN(4) {
		var v json.RawMessage = json.RawMessage(weird[rng.IntN(len(weird))])
		if rng.IntN(2) == 0 {
			v = json.RawMessage("[" + string(v) + "]")
		}
		f[filterPaths[rng.IntN(len(filterPaths))]] = map[string]any{"conditions": map[string]any{filterOps[rng.IntN(len(filterOps))]: v}}
	}
	if rng.IntN(3) == 0 {
		f["junction"] = []any{"and", "OR", "xor", 1}[rng.IntN(4)]
	}
	b, _ := json.Marshal(map[string]any{"name": "f", "type": []any{"auto-update", "passive", "static", nil}[rng.IntN(4)], "filter": f})
	return b
}
