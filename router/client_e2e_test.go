package router_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// clientProject makes a project whose client-side API trusts domains, with
// the per-address limit raised out of the tests' way (or not, when raise
// is false), and waits until the router serves origin.
func clientProject(t *testing.T, e *stacktest.Env, origin string, raise bool, domains ...string) stacktest.Project {
	t.Helper()
	p := e.CreateProject(t, "api")
	m := map[string]any{"client_trusted_domains": domains}
	if raise {
		m["client_ip_rate_limit"] = map[string]any{"requests": 100000, "seconds": 1}
	}
	putSettings(t, e, p, m)
	stacktest.Eventually(t, 5*time.Second, "the settings in force", func() bool {
		return e.Do(t, "GET", stacktest.URL("api", "/client/v1/promotions/tiers"), p.ClientHeader(origin), nil).Status == 200
	})
	return p
}

func putSettings(t *testing.T, e *stacktest.Env, p stacktest.Project, m map[string]any) {
	t.Helper()
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(), m); r.Status != 200 {
		t.Fatalf("settings: %d %s", r.Status, r.Body)
	}
}

var corsHeaders = []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
	"Access-Control-Max-Age", "Access-Control-Expose-Headers", "Access-Control-Allow-Credentials"}

func noCORS(t *testing.T, h http.Header, what string) {
	t.Helper()
	for _, k := range corsHeaders {
		if v := h.Get(k); v != "" {
			t.Fatalf("%s: %s: %s, want no CORS headers", what, k, v)
		}
	}
}

// Allowed origins: exact, patterns over subdomains, * for any; every other
// origin refused with 403 naming it and no CORS headers, so the browser
// blocks the page's script from the answer.
func TestClientOriginsExactPatternAnyAndRefused(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	const shop = "https://shop.example"
	p := clientProject(t, e, shop, true, shop, "https://*.brand.example", "http://localhost:3000")
	get := func(origin string) stacktest.Resp {
		t.Helper()
		return e.Do(t, "GET", stacktest.URL("api", "/client/v1/promotions/tiers"), p.ClientHeader(origin), nil)
	}
	for _, origin := range []string{shop, "https://a.brand.example", "https://x.y.brand.example", "http://localhost:3000"} {
		r := get(origin)
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != origin || r.Header.Get("Vary") != "Origin" ||
			!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Rate-Limit-Remaining") {
			t.Fatalf("%s: %d %v %s", origin, r.Status, r.Header, r.Body)
		}
	}
	for _, origin := range []string{"https://evil.example", "https://brand.example", "http://shop.example", "https://shop.example:8443",
		"https://shop.example.evil", "null", ""} {
		r := get(origin)
		m := r.JSON(t)
		details, _ := m["details"].(string)
		if r.Status != 403 || m["key"] != "origin_not_allowed" || (origin != "" && !strings.Contains(details, `"`+origin+`"`)) ||
			r.Header.Get("Vary") != "" {
			t.Fatalf("origin %q: %d %s", origin, r.Status, r.Body)
		}
		noCORS(t, r.Header, "origin "+origin)
	}
	// * (development): any origin, echoed.
	putSettings(t, e, p, map[string]any{"client_trusted_domains": []string{"*"}})
	stacktest.Eventually(t, 5*time.Second, "* in force", func() bool { return get("https://anything.example").Status == 200 })
	if r := get("https://other.example"); r.Header.Get("Access-Control-Allow-Origin") != "https://other.example" {
		t.Fatalf("*: %v", r.Header)
	}
	// The list reads back as written.
	got := e.Do(t, "GET", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(), nil).JSON(t)
	if d := got["client_trusted_domains"].([]any); len(d) != 1 || d[0] != "*" {
		t.Fatalf("client_trusted_domains: %v", got["client_trusted_domains"])
	}
}

// A preflight is answered by the router (no span of the trace reaches a
// region) with exactly the CORS headers the client SDK needs, for an origin
// a project of the cluster trusts; a refused origin's gets none.
func TestPreflightIsAnsweredAtTheRouter(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	const shop = "https://shop.example"
	clientProject(t, e, shop, true, shop)
	preflight := func(origin string) (stacktest.Resp, int) {
		t.Helper()
		ctx, root := otel.Tracer("test").Start(context.Background(), "browser")
		h := http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"},
			"Access-Control-Request-Headers": {"content-type,x-client-application-id,x-client-token,x-voucherify-channel"}}
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
		r := e.Do(t, "OPTIONS", stacktest.URL("api", "/client/v1/events"), h, nil)
		root.End()
		time.Sleep(200 * time.Millisecond) // the server span ends after the answer
		// Past the router means a forward span or a second server span
		// (the region's); the router's own directory reads may add
		// database spans, which stay at the edge.
		n := 0
		for _, s := range spans.GetSpans() {
			if s.SpanContext.TraceID() != root.SpanContext().TraceID() {
				continue
			}
			if s.SpanKind == trace.SpanKindServer || s.InstrumentationScope.Name == "github.com/tallyhq/tally/router" {
				n++
			}
		}
		return r, n
	}
	r, spansOf := preflight(shop)
	want := map[string]string{
		"Access-Control-Allow-Origin":  shop,
		"Vary":                         "Origin",
		"Access-Control-Allow-Methods": "GET, POST, PUT, DELETE",
		"Access-Control-Allow-Headers": "X-Client-Application-Id, X-Client-Token, Content-Type, X-Voucherify-Channel, " +
			"X-Voucherify-Double-Opt-In, Authorization",
		"Access-Control-Max-Age": "7200",
	}
	if r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("preflight: %d %s", r.Status, r.Body)
	}
	for k, v := range want {
		if got := r.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Fatalf("preflight %s: %q, want %q", k, got, v)
		}
	}
	if spansOf != 1 {
		t.Fatalf("the preflight's trace has %d server or forward spans: it went past the router", spansOf)
	}
	r, _ = preflight("https://evil.example")
	if r.Status != 403 || r.JSON(t)["key"] != "origin_not_allowed" || !strings.Contains(string(r.Body), "https://evil.example") {
		t.Fatalf("refused preflight: %d %s", r.Status, r.Body)
	}
	noCORS(t, r.Header, "refused preflight")
}

// Each API takes its own keys: server keys are refused on /client/v1,
// client keys on /v1, whichever headers carry them.
func TestClientAndServerKeysStayOnTheirAPIs(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	const shop = "https://shop.example"
	p := clientProject(t, e, shop, true, shop)
	serverAsClient := http.Header{"X-Client-Application-Id": {p.AppID}, "X-Client-Token": {p.AppToken}, "Origin": {shop}}
	clientAsServer := http.Header{"X-App-Id": {p.ClientAppID}, "X-App-Token": {p.ClientToken}}
	serverHeaders := p.Header()
	serverHeaders.Set("Origin", shop)
	for what, c := range map[string]struct {
		path string
		h    http.Header
	}{
		"server keys in X-App-* on /client/v1":    {"/client/v1/promotions/tiers", serverHeaders},
		"server keys in X-Client-* on /client/v1": {"/client/v1/promotions/tiers", serverAsClient},
		"client keys in X-App-* on /v1":           {"/v1/promotions/tiers", clientAsServer},
		"client keys in X-Client-* on /v1":        {"/v1/promotions/tiers", p.ClientHeader("")},
	} {
		if r := e.Do(t, "GET", stacktest.URL("api", c.path), c.h, nil); r.Status != 401 || r.JSON(t)["key"] != "unauthorized" {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
	}
}

// The per-address limit (default 5 per 5 s) holds on the client-side
// endpoints, and its 429 is readable by the trusted page.
func TestClientEndpointsKeepThePerAddressLimit(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	const shop = "https://shop.example"
	p := e.CreateProject(t, "api")
	putSettings(t, e, p, map[string]any{"client_trusted_domains": []string{shop}})
	var ok int
	var last stacktest.Resp
	deadline := time.Now().Add(10 * time.Second)
	for last.Status != 429 && time.Now().Before(deadline) {
		last = e.Do(t, "POST", stacktest.URL("api", "/client/v1/events"), p.ClientHeader(shop), map[string]any{"event": "x"})
		if last.Status != 403 && last.Status != 429 {
			ok++ // the first ones may come before the settings are in force
		}
	}
	if last.Status != 429 || ok > 5 || last.Header.Get("Access-Control-Allow-Origin") != shop || last.Header.Get("X-Rate-Limit-Limit") != "5" {
		t.Fatalf("after %d answered: %d %v %s", ok, last.Status, last.Header, last.Body)
	}
}
