package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const shop = "https://shop.example"

// settings changes the project's client-side settings.
func settings(a stacktest.API, m map[string]any) {
	a.T.Helper()
	if r := a.E.Do(a.T, "PUT", "http://api.localhost/management/v1/projects/"+a.P.ID, a.E.MgmtHeader(), m); r.Status != 200 {
		a.T.Fatalf("settings: %d %s", r.Status, r.Body)
	}
}

// start makes a project that trusts shop (and its subdomains), without the
// per-address limit's default, which the tests would reach.
func start(t *testing.T, toggles ...string) stacktest.API {
	a := stacktest.NewAPI(t)
	m := map[string]any{"client_trusted_domains": []string{shop, "https://*.shop.example"},
		"client_ip_rate_limit": map[string]any{"requests": 100000, "seconds": 1}}
	for _, f := range toggles {
		m[f] = true
	}
	settings(a, m)
	stacktest.Eventually(t, 5*time.Second, "the settings in force", func() bool {
		return client(a, shop, "GET", "/client/v1/promotions/tiers", nil).Status == 200
	})
	return a
}

var allToggles = []string{"client_publish_enabled", "client_list_vouchers_enabled", "client_create_customer_enabled",
	"client_loyalty_events_enabled"}

// client sends a client-side request with the project's client keys from origin.
func client(a stacktest.API, origin, method, path string, body any) stacktest.Resp {
	a.T.Helper()
	return a.E.Do(a.T, method, stacktest.URL("api", path), a.P.ClientHeader(origin), body)
}

// schema defines a custom event and waits until events of it are taken.
func schema(a stacktest.API, name string) {
	a.T.Helper()
	if r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": name, "schema": map[string]any{"properties": map[string]any{}}}); r.Status != 200 {
		a.T.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	stacktest.Eventually(a.T, 5*time.Second, "the schema in force", func() bool {
		return a.Do("POST", "/v1/events", map[string]any{"event": name, "customer": map[string]any{"source_id": "probe"}}).Status == 200
	})
}

// campaign makes a discount campaign of n vouchers and waits for them.
func campaign(a stacktest.API, name string, n int) {
	a.T.Helper()
	c := a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"vouchers_count": n, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}})
	if id, ok := c["async_action_id"].(string); ok {
		a.WaitAction(id)
	}
}

func object(t *testing.T, r stacktest.Resp, what string) map[string]any {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	return r.JSON(t)
}

// The client SDK's calls, each with the client keys from a trusted origin,
// answer what their server-side twins answer (an older API version's
// shape included), readable by the page (CORS headers on every answer).
func TestClientEndpointsAnswerAsTheirServerTwins(t *testing.T) {
	t.Parallel()
	a := start(t, allToggles...)
	schema(a, "page_view")
	campaign(a, "Spring", 5)
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Sale", "campaign_type": "PROMOTION", "promotion": map[string]any{
		"tiers": []any{map[string]any{"name": "10 off", "banner": "10 off!", "action": map[string]any{
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 1000}}}}}})

	h := a.P.ClientHeader(shop)
	h.Set("X-Voucherify-Double-Opt-In", "true")
	r := a.E.Do(t, "POST", stacktest.URL("api", "/client/v1/customers"), h, map[string]any{"source_id": "ann", "name": "Ann",
		"email": "ann@example.com"})
	cust := object(t, r, "customer")
	if server := a.OK("GET", "/v1/customers/ann", nil); cust["id"] != server["id"] || cust["name"] != "Ann" || cust["object"] != "customer" {
		t.Fatalf("the customer made client-side: %v, server-side %v", cust, server)
	}
	if r.Header.Get("Access-Control-Allow-Origin") != shop || !strings.Contains(r.Header.Get("Vary"), "Origin") {
		t.Fatalf("CORS headers: %v", r.Header)
	}
	annID := cust["id"].(string)

	// The SDK's track(): empty referral and loyalty objects.
	ev := object(t, client(a, shop, "POST", "/client/v1/events", map[string]any{"event": "page_view",
		"customer": map[string]any{"source_id": "ann"}, "referral": map[string]any{}, "loyalty": map[string]any{},
		"metadata": map[string]any{}}), "event")
	if ev["object"] != "event" || ev["type"] != "page_view" || ev["customer"].(map[string]any)["id"] != annID {
		t.Fatalf("event: %v", ev)
	}

	// The SDK's publish(): the campaign in the query, its default channel.
	pub := object(t, client(a, shop, "POST", "/client/v1/publish?campaign=Spring", map[string]any{
		"customer": map[string]any{"source_id": "ann"}, "channel": "Voucherify.js"}), "publication")
	if pub["object"] != "publication" || pub["channel"] != "Voucherify.js" || pub["customer_id"] != annID ||
		pub["voucher"].(map[string]any)["holder_id"] != annID {
		t.Fatalf("publication: %v", pub)
	}
	// Before v2017-04-20 publishing answers the voucher, on both APIs (sent
	// without the conformance recorder: the reference has the newest shape).
	old := a.P.ClientHeader(shop)
	old.Set("X-Voucherify-API-Version", "v2017-04-05")
	v := object(t, stacktest.Do(t, a.E.Client, "POST", stacktest.URL("api", "/client/v1/publish?campaign=Spring"), old,
		map[string]any{"customer": map[string]any{"source_id": "ann"}}), "publication of v2017-04-05")
	if v["object"] != "voucher" || v["holder_id"] != annID {
		t.Fatalf("v2017-04-05 publication: %v", v)
	}

	// Lists: the same body as the server's.
	for client_, server := range map[string]string{
		"/client/v1/vouchers?customer=" + annID: "/v1/vouchers?customer=" + annID,
		"/client/v1/vouchers?limit=2":           "/v1/vouchers?limit=2",
		"/client/v1/promotions/tiers":           "/v1/promotions/tiers",
		"/client/v1/promotions/tiers?limit=1":   "/v1/promotions/tiers?limit=1",
	} {
		got, want := object(t, client(a, shop, "GET", client_, nil), client_), a.OK("GET", server, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s answers\n%v\n%s answers\n%v", client_, got, server, want)
		}
	}
	if vs := a.OK("GET", "/v1/vouchers?customer="+annID, nil); len(vs["vouchers"].([]any)) != 2 {
		t.Fatalf("ann's vouchers: %v", vs)
	}
	// A route the client API does not serve: 404, not its twin.
	if r := client(a, shop, "GET", "/client/v1/customers/ann", nil); r.Status != 404 && r.Status != 405 {
		t.Fatalf("GET /client/v1/customers/ann: %d %s", r.Status, r.Body)
	}
}

// Each danger-zone toggle is off until an admin enables it: the action is
// refused with 403 naming the toggle, then served.
func TestDangerZoneTogglesRefuseUntilEnabled(t *testing.T) {
	t.Parallel()
	a := start(t)
	schema(a, "page_view")
	campaign(a, "Spring", 3)
	campID := a.Campaign("Visits", nil)["id"].(string)
	card := a.Member(campID, "ann")["code"].(string)
	proj := a.E.Do(t, "GET", "http://api.localhost/management/v1/projects/"+a.P.ID, a.E.MgmtHeader(), nil).JSON(t)
	for _, f := range append(allToggles, "client_redeem_enabled", "client_set_voucher_expiration_date_enabled") {
		if proj[f] != false {
			t.Fatalf("%s is not off by default: %v", f, proj[f])
		}
	}
	cases := []struct {
		flag, method, path string
		body               any
	}{
		{"client_publish_enabled", "POST", "/client/v1/publish?campaign=Spring", map[string]any{"customer": map[string]any{"source_id": "ann"}}},
		{"client_list_vouchers_enabled", "GET", "/client/v1/vouchers", nil},
		{"client_create_customer_enabled", "POST", "/client/v1/customers", map[string]any{"source_id": "bob"}},
		{"client_loyalty_events_enabled", "POST", "/client/v1/events", map[string]any{"event": "page_view",
			"customer": map[string]any{"source_id": "ann"}, "loyalty": map[string]any{"code": card}}},
		{"client_loyalty_events_enabled", "POST", "/client/v1/events", map[string]any{"event": "page_view",
			"customer": map[string]any{"source_id": "ann"}, "referral": map[string]any{"code": "REF-1"}}},
	}
	for _, c := range cases {
		r := client(a, shop, c.method, c.path, c.body)
		m := r.JSON(t)
		if r.Status != 403 || m["key"] != "client_side_action_disabled" || !strings.Contains(m["details"].(string), c.flag) ||
			r.Header.Get("Access-Control-Allow-Origin") != shop {
			t.Fatalf("%s %s while %s is off: %d %s", c.method, c.path, c.flag, r.Status, r.Body)
		}
	}
	// An event for no program needs no toggle.
	if r := client(a, shop, "POST", "/client/v1/events", map[string]any{"event": "page_view", "customer": map[string]any{"source_id": "ann"},
		"referral": map[string]any{}, "loyalty": map[string]any{}}); r.Status != 200 {
		t.Fatalf("a plain event: %d %s", r.Status, r.Body)
	}
	m := map[string]any{}
	for _, f := range allToggles {
		m[f] = true
	}
	settings(a, m)
	for _, c := range cases[:4] {
		stacktest.Eventually(t, 5*time.Second, c.flag+" enabled", func() bool {
			return client(a, shop, c.method, c.path, c.body).Status == 200
		})
	}
	// The referral code names no referral program here: the twin's answer.
	if r := client(a, shop, "POST", "/client/v1/events", cases[4].body); r.Status == 403 {
		t.Fatalf("the referral event once enabled: %d %s", r.Status, r.Body)
	}
}

// token mints a client-side token through the server's OAuth endpoint.
func token(a stacktest.API, form url.Values) (int, map[string]any) {
	a.T.Helper()
	form.Set("grant_type", "client_credentials")
	req, _ := http.NewRequest("POST", stacktest.URL("api", "/v1/oauth/token"), strings.NewReader(form.Encode()))
	req.Header = a.P.Header()
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := a.E.Client.Do(req)
	if err != nil {
		a.T.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

// A token the merchant's server mints for one customer and origin acts
// for that customer only, from that origin only, on the client API only.
func TestACustomerBoundTokenActsOnlyForItsCustomer(t *testing.T) {
	t.Parallel()
	a := start(t, allToggles...)
	schema(a, "page_view")
	campaign(a, "Spring", 6)
	annID := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})["id"].(string)
	bobID := a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob"})["id"].(string)
	a.OK("POST", "/v1/publications", map[string]any{"campaign": "Spring", "customer": bobID})

	scope := "client_events client_publish client_customers client_vouchers client_promotions"
	for name, c := range map[string]struct {
		form url.Values
		key  string
	}{
		"a server scope":          {url.Values{"scope": {"api client_events"}, "customer": {"ann"}, "origin": {shop}}, "invalid_scope"},
		"an untrusted origin":     {url.Values{"scope": {scope}, "customer": {"ann"}, "origin": {"https://evil.example"}}, "invalid_origin"},
		"no origin":               {url.Values{"scope": {scope}, "customer": {"ann"}}, "missing_parameters"},
		"a pattern for an origin": {url.Values{"scope": {scope}, "customer": {"ann"}, "origin": {"https://*.shop.example"}}, "invalid_origin"},
	} {
		if status, m := token(a, c.form); status != 400 || m["key"] != c.key {
			t.Fatalf("%s: %d %v", name, status, m)
		}
	}
	status, m := token(a, url.Values{"scope": {scope}, "customer": {"ann"}, "origin": {shop}})
	if status != 200 || m["customer"] != "ann" || m["origin"] != shop || m["expires_in"] != float64(900) {
		t.Fatalf("token: %d %v", status, m)
	}
	bearer := func(origin, method, path string, body any) stacktest.Resp {
		t.Helper()
		h := http.Header{"Authorization": {"Bearer " + m["access_token"].(string)}, "Origin": {origin}}
		return a.E.Do(t, method, stacktest.URL("api", path), h, body)
	}
	refused := func(r stacktest.Resp, key, what string) {
		t.Helper()
		if r.Status != 403 || r.JSON(t)["key"] != key {
			t.Fatalf("%s: %d %s, want 403 %s", what, r.Status, r.Body, key)
		}
	}
	event := func(customer any) map[string]any {
		b := map[string]any{"event": "page_view"}
		if customer != nil {
			b["customer"] = customer
		}
		return b
	}
	for name, c := range map[string]any{"by source_id": map[string]any{"source_id": "ann", "name": "Ann"},
		"by id": map[string]any{"id": annID}, "unnamed": nil, "named by neither": map[string]any{"email": "ann@example.com"}} {
		ev := object(t, bearer(shop, "POST", "/client/v1/events", event(c)), "ann's event "+name)
		if ev["customer"].(map[string]any)["id"] != annID {
			t.Fatalf("ann's event %s went to %v", name, ev["customer"])
		}
	}
	for name, c := range map[string]any{"by source_id": map[string]any{"source_id": "bob"}, "by id": map[string]any{"id": bobID},
		"both, one another's": map[string]any{"source_id": "ann", "id": bobID}, "an unknown one": map[string]any{"source_id": "carol"},
		"ann's id as a source_id": map[string]any{"source_id": annID}} {
		refused(bearer(shop, "POST", "/client/v1/events", event(c)), "customer_not_permitted", "an event for "+name)
	}
	// A key the twin's JSON decoding would read as another (case, or
	// Unicode's folding: ſ is s) is refused, not let past the binding.
	for _, body := range []map[string]any{
		event(map[string]any{"ſource_id": "bob"}), event(map[string]any{"SOURCE_ID": "bob"}), event(map[string]any{"Id": bobID}),
		{"event": "page_view", "Customer": map[string]any{"source_id": "bob"}},
	} {
		if r := bearer(shop, "POST", "/client/v1/events", body); r.Status != 400 || r.JSON(t)["key"] != "invalid_payload" {
			t.Fatalf("%v: %d %s, want 400 invalid_payload", body, r.Status, r.Body)
		}
	}
	refused(bearer(shop, "POST", "/client/v1/publish?campaign=Spring", map[string]any{"customer": bobID}), "customer_not_permitted", "publish to bob")
	refused(bearer(shop, "POST", "/client/v1/publish?campaign=Spring", map[string]any{"customer": map[string]any{"source_id": "bob"}}),
		"customer_not_permitted", "publish to bob by source_id")
	if pub := object(t, bearer(shop, "POST", "/client/v1/publish?campaign=Spring", map[string]any{}), "publish"); pub["customer_id"] != annID {
		t.Fatalf("publication of ann's token: %v", pub)
	}
	refused(bearer(shop, "POST", "/client/v1/customers", map[string]any{"source_id": "bob", "name": "Mallory"}), "customer_not_permitted",
		"update bob")
	if c := object(t, bearer(shop, "POST", "/client/v1/customers", map[string]any{"name": "Ann B"}), "ann herself"); c["id"] != annID ||
		c["name"] != "Ann B" {
		t.Fatalf("ann's update: %v", c)
	}
	refused(bearer(shop, "GET", "/client/v1/vouchers?customer="+bobID, nil), "customer_not_permitted", "bob's vouchers")
	vs := object(t, bearer(shop, "GET", "/client/v1/vouchers", nil), "ann's vouchers")["vouchers"].([]any)
	if len(vs) != 1 || vs[0].(map[string]any)["holder_id"] != annID {
		t.Fatalf("the vouchers listed for ann's token: %v", vs)
	}
	if r := bearer(shop, "GET", "/client/v1/promotions/tiers", nil); r.Status != 200 {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	// Another origin, even a trusted one; no origin; the application API.
	refused(bearer("https://www.shop.example", "GET", "/client/v1/promotions/tiers", nil), "origin_not_allowed", "another origin")
	refused(bearer("", "GET", "/client/v1/promotions/tiers", nil), "origin_not_allowed", "no origin")
	refused(bearer(shop, "GET", "/v1/customers", nil), "missing_scope", "the application API")
	// The project's client key is bound to no customer.
	object(t, client(a, shop, "POST", "/client/v1/events", event(map[string]any{"source_id": "bob"})), "bob's event by the client key")
}

// A client-side publication that sets its voucher's expiration (to make a
// visitor's code urgent) needs client_set_voucher_expiration_date_enabled
// besides client_publish_enabled; then the voucher expires then.
func TestClientPublishSetsTheExpirationOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	a := start(t, allToggles...)
	campaign(a, "Urgent", 3)
	at := time.Now().UTC().Add(15 * time.Minute).Truncate(time.Millisecond)
	body := map[string]any{"customer": map[string]any{"source_id": "ann"}, "expiration_date": at.Format(time.RFC3339Nano)}
	r := client(a, shop, "POST", "/client/v1/publish?campaign=Urgent", body)
	if m := r.JSON(t); r.Status != 403 || m["key"] != "client_side_action_disabled" ||
		!strings.Contains(m["details"].(string), "client_set_voucher_expiration_date_enabled") {
		t.Fatalf("an expiration while the toggle is off: %d %s", r.Status, r.Body)
	}
	for _, key := range []string{"EXPIRATION_DATE", "Expiration_Date"} {
		r := client(a, shop, "POST", "/client/v1/publish?campaign=Urgent", map[string]any{"customer": map[string]any{"source_id": "ann"},
			key: at.Format(time.RFC3339Nano)})
		if r.Status != 400 || r.JSON(t)["key"] != "invalid_payload" {
			t.Fatalf("%s while the toggle is off: %d %s", key, r.Status, r.Body)
		}
	}
	if l := a.OK("GET", "/v1/publications?campaign=Urgent", nil); l["total"] != 0.0 {
		t.Fatalf("a refused publication was made: %v", l)
	}
	settings(a, map[string]any{"client_set_voucher_expiration_date_enabled": true})
	stacktest.Eventually(t, 5*time.Second, "client_set_voucher_expiration_date_enabled in force", func() bool {
		r = client(a, shop, "POST", "/client/v1/publish?campaign=Urgent", body)
		return r.Status != 403
	})
	p := object(t, r, "publication with an expiration")
	v, _ := p["voucher"].(map[string]any)
	if v["expiration_date"] != at.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("the published voucher: %v", v)
	}
	if got := a.OK("GET", "/v1/vouchers/"+v["code"].(string), nil)["expiration_date"]; got != v["expiration_date"] {
		t.Fatalf("read back: %v", got)
	}
}
