package router_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// The OAuth flow end to end: a token for scopes, used, refused where its
// scopes do not reach, introspected, revoked (refused by two routers
// within 2 s), and stopped with the key that issued it.
func TestOAuthTokensGrantTheirScopesUntilRevoked(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	second, err := e.Stack.StartRouter()
	if err != nil {
		t.Fatal(err)
	}
	// send answers req: its status, header and JSON body (nil when not JSON).
	send := func(req *http.Request) (int, http.Header, map[string]any) {
		t.Helper()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return res.StatusCode, res.Header, m
	}
	form := func(path string, h http.Header, values url.Values) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.Stack.BaseURL("api")+path, strings.NewReader(values.Encode()))
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		status, header, m := send(req)
		return status, m, header
	}
	issue := func(h http.Header, scope string) string {
		t.Helper()
		status, m, _ := form("/v1/oauth/token", h, url.Values{"grant_type": {"client_credentials"}, "scope": {scope}})
		if status != 200 || m["token_type"] != "Bearer" || m["expires_in"] != float64(900) || m["client_id"] != p.AppID ||
			m["expires_at"].(float64) < float64(time.Now().Unix()+890) {
			t.Fatalf("token for %q: %d %v", scope, status, m)
		}
		return m["access_token"].(string)
	}
	with := func(base, token, path string) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "api.localhost"
		req.Header.Set("Authorization", "Bearer "+token)
		return send(req)
	}
	api := e.Stack.BaseURL("api")

	// Refusals of the token endpoint.
	if status, m, _ := form("/v1/oauth/token", p.Header(), url.Values{"grant_type": {"password"}, "scope": {"api"}}); status != 400 ||
		m["key"] != "invalid_grant_type" {
		t.Fatalf("a wrong grant: %d %v", status, m)
	}
	if status, m, _ := form("/v1/oauth/token", p.Header(), url.Values{"grant_type": {"client_credentials"}, "scope": {"loyalties,customers nope"}}); status != 400 ||
		m["key"] != "invalid_scope" || m["message"] != "Invalid scope: loyalties,customers,nope" {
		t.Fatalf("comma-separated and unknown scopes: %d %v", status, m)
	}
	if status, _, _ := form("/v1/oauth/token", http.Header{}, url.Values{"grant_type": {"client_credentials"}, "scope": {"api"}}); status != 401 {
		t.Fatalf("no key: %d", status)
	}

	// A token for customers and loyalties, asked with HTTP Basic.
	basic := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(p.AppID+":"+p.AppToken))}}
	tok := issue(basic, "customers loyalties")
	if status, h, _ := with(api, tok, "/v1/customers"); status != 200 || h.Get("X-Rate-Limit-Limit") == "" {
		t.Fatalf("customers with its scope: %d", status)
	}
	status, h, m := with(api, tok, "/v1/orders")
	if details, _ := m["details"].(string); status != 403 || m["key"] != "missing_scope" || !strings.Contains(details, "orders") ||
		!strings.Contains(h.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("orders without its scope: %d %v %v", status, m, h)
	}
	if status, _, _ := with(api, issue(p.Header(), "api"), "/v1/orders"); status != 200 {
		t.Fatalf("orders with api: %d", status)
	}

	// Introspection.
	status, m, _ = form("/v1/oauth/introspect", p.Header(), url.Values{"access_token": {tok}})
	if status != 200 || m["active"] != true || m["scope"] != "customers loyalties" || m["client_id"] != p.AppID {
		t.Fatalf("introspect: %d %v", status, m)
	}
	if status, m, _ := form("/v1/oauth/introspect", p.Header(), url.Values{"access_token": {"nope"}}); status != 200 || m["active"] != false || len(m) != 1 {
		t.Fatalf("introspect an unknown token: %d %v", status, m)
	}
	if status, m, _ := form("/v1/oauth/introspect", p.Header(), url.Values{}); status != 400 || m["key"] != "missing_parameters" {
		t.Fatalf("introspect nothing: %d %v", status, m)
	}

	// Revoked: refused by both routers within 2 s, with the Bearer challenge.
	for _, base := range []string{api, second} {
		if status, _, _ := with(base, tok, "/v1/customers"); status != 200 {
			t.Fatalf("before the revocation at %s: %d", base, status)
		}
	}
	if status, _, _ := form("/v1/oauth/token/revoke", p.Header(), url.Values{"access_token": {tok}}); status != 204 {
		t.Fatalf("revoke: %d", status)
	}
	revoked := time.Now()
	for _, base := range []string{api, second} {
		stacktest.Eventually(t, 2*time.Second-time.Since(revoked), "the revocation at "+base, func() bool {
			status, h, _ := with(base, tok, "/v1/customers")
			return status == 401 && h.Get("WWW-Authenticate") == `Bearer error="invalid_token"`
		})
	}
	if status, _, _ := form("/v1/oauth/token/revoke", p.Header(), url.Values{"access_token": {tok}}); status != 404 {
		t.Fatalf("revoke twice: %d", status)
	}

	// Another project's token reads its own project only.
	other := e.CreateProject(t, "api")
	c := e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"source_id": "ann"}).JSON(t)
	otherHeader := http.Header{"X-App-Id": {other.AppID}, "X-App-Token": {other.AppToken}}
	otherTok := ""
	{
		status, m, _ := form("/v1/oauth/token", otherHeader, url.Values{"grant_type": {"client_credentials"}, "scope": {"api"}})
		if status != 200 {
			t.Fatalf("other project's token: %d %v", status, m)
		}
		otherTok = m["access_token"].(string)
	}
	if status, _, _ := with(api, otherTok, "/v1/customers/"+c["id"].(string)); status != 404 {
		t.Fatalf("another project's token on this project's customer: %d, want 404", status)
	}

	// Revoking the key stops its tokens within 2 s.
	keyTok := issue(p.Header(), "api")
	if r := e.Do(t, "DELETE", "http://api.localhost/management/v1/projects/"+p.ID+"/api-keys/"+p.AppID, e.MgmtHeader(), nil); r.Status/100 != 2 {
		t.Fatalf("revoke the key: %d %s", r.Status, r.Body)
	}
	gone := time.Now()
	for _, base := range []string{api, second} {
		stacktest.Eventually(t, 2*time.Second-time.Since(gone), "the key's revocation at "+base, func() bool {
			status, _, _ := with(base, keyTok, "/v1/customers")
			return status == 401
		})
	}

	// An expired token, and the most live tokens a project may hold.
	ctx := context.Background()
	key, err := tenancy.GetAppKey(ctx, e.Stack.Tenancy, other.AppID)
	if err != nil {
		t.Fatal(err)
	}
	var expired string
	if err := db.InTx(ctx, e.Stack.Tenancy, func(tx pgx.Tx) error {
		expired, _, err = tenancy.CreateToken(ctx, tx, key, []string{"api"}, tenancy.Binding{}, time.Now().Add(-tenancy.TokenLifetime-time.Second))
		if err != nil {
			return err
		}
		for range tenancy.MaxTokens - 1 { // the one above is live
			if _, _, err := tenancy.CreateToken(ctx, tx, key, []string{"api"}, tenancy.Binding{}, time.Now()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := with(api, expired, "/v1/customers"); status != 401 {
		t.Fatalf("an expired token: %d", status)
	}
	if status, m, _ := form("/v1/oauth/token", otherHeader, url.Values{"grant_type": {"client_credentials"}, "scope": {"api"}}); status != 400 ||
		m["key"] != "too_many_tokens" {
		t.Fatalf("token 1,001: %d %v", status, m)
	}
}

// The OAuth endpoints count against the project's limits like its other
// calls: each reads or writes the tenancy database (an issue locks the
// project's row), so a key could otherwise load the shared directory
// without bound.
func TestOAuthCallsCountAgainstTheProjectsLimit(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/plans/tiny", e.MgmtHeader(),
		map[string]any{"requests_per_minute": 3}); r.Status != 200 {
		t.Fatalf("plan: %d %s", r.Status, r.Body)
	}
	p := e.CreateProject(t, "api")
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(),
		map[string]any{"plan": "tiny"}); r.Status != 200 {
		t.Fatalf("plan of the project: %d %s", r.Status, r.Body)
	}
	var statuses []int
	for range 7 { // 3 + 3 if a minute ends among them, then a refusal
		req, _ := http.NewRequest("POST", e.Stack.BaseURL("api")+"/v1/oauth/introspect",
			strings.NewReader(url.Values{"access_token": {"nope"}}.Encode()))
		req.Header = p.Header()
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		statuses = append(statuses, res.StatusCode)
		if res.Header.Get("X-Rate-Limit-Limit") != "3" {
			t.Fatalf("introspection without the limit headers: %v", res.Header)
		}
	}
	if statuses[0] != 200 || statuses[6] != 429 {
		t.Fatalf("seven introspections under a limit of 3 a minute: %v", statuses)
	}
}

// Credentials and a token's customer that are not text (bytes that are no
// UTF-8, a NUL) are a caller's mistake, answered 401 or 400: not a 503
// that blames the directory, which rejected them as unstorable.
func TestMalformedCredentialsAreTheCallersMistake(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(),
		map[string]any{"client_trusted_domains": []string{"https://shop.example"}})
	send := func(method, path string, h http.Header, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, e.Stack.BaseURL("api")+path, strings.NewReader(body))
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for name, c := range map[string]struct {
		method, path string
		h            http.Header
		body         string
		want         int
	}{
		"app id":        {"GET", "/v1/customers", http.Header{"X-App-Id": {"app_\xff"}, "X-App-Token": {"x"}}, "", 401},
		"client id":     {"GET", "/client/v1/vouchers", http.Header{"X-Client-Application-Id": {"\xfe\xff"}, "X-Client-Token": {"x"}, "Origin": {"https://shop.example"}}, "", 401},
		"management id": {"GET", "/management/v1/projects", http.Header{"X-Management-Id": {"m_\xff"}, "X-Management-Token": {"x"}}, "", 401},
		"basic id": {"POST", "/v1/oauth/token", http.Header{"Content-Type": {"application/x-www-form-urlencoded"},
			"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("app_\xff:x"))}}, "grant_type=client_credentials&scope=api", 401},
		"customer not UTF-8": {"POST", "/v1/oauth/token", func() http.Header {
			h := p.Header()
			h.Set("Content-Type", "application/x-www-form-urlencoded")
			return h
		}(), "grant_type=client_credentials&scope=client_api&origin=https://shop.example&customer=ann%ff", 400},
		"customer with a NUL": {"POST", "/v1/oauth/token", func() http.Header {
			h := p.Header()
			h.Set("Content-Type", "application/x-www-form-urlencoded")
			return h
		}(), "grant_type=client_credentials&scope=client_api&origin=https://shop.example&customer=ann%00", 400},
	} {
		if got := send(c.method, c.path, c.h, c.body); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
}
