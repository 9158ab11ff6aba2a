package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// chromium finds Debian's Chromium, installing it (scripts/ensure-chromium.sh)
// when it is missing; the test is skipped only when that fails.
func chromium(t *testing.T) string {
	t.Helper()
	find := func() string {
		for _, b := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(b); err == nil {
				return p
			}
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	out, err := exec.Command(filepath.Join("..", "scripts", "ensure-chromium.sh")).CombinedOutput()
	if p := find(); p != "" {
		return p
	}
	t.Skipf("the browser test needs Chromium, which could not be installed (scripts/ensure-chromium.sh: %v): %s", err, out)
	return ""
}

// page is a shop's page: its script calls the client-side API the way the
// client SDK does (its headers, its bodies) and reports what it got back to
// the page's own server.
const page = `<!doctype html><html><body><script>
const call = (path, body) => fetch("%[1]s/client/v1/" + path, {method: "POST", headers: {"Content-Type": "application/json",
    "X-Client-Application-Id": "%[2]s", "X-Client-Token": "%[3]s", "X-Voucherify-Channel": "Browser-ClientSide-SDK-v2.9.4"},
    body: JSON.stringify(body)})
  .then(r => r.json().then(b => ({status: r.status, keys: Object.keys(b).join(","), type: b.type,
    customer: b.customer && b.customer.source_id, remaining: r.headers.get("X-Rate-Limit-Remaining")})))
  .catch(e => ({blocked: String(e)}));
Promise.all([
  call("events", {event: "page_view", customer: {source_id: "ann"}, referral: {}, loyalty: {}, metadata: {}}),
  call("qualifications", {customer: {source_id: "ann"}, order: {amount: 5000}}),
]).then(([events, qualifications]) => fetch("/report", {method: "POST", body: JSON.stringify({events, qualifications})}));
</script></body></html>`

// A page from an allowed origin calls /client/v1/events and
// /client/v1/qualifications from headless Chromium and reads the answers;
// the same page from another origin is blocked by the browser, the
// preflight having been refused.
func TestABrowserCallsTheClientAPIFromAnAllowedOriginOnly(t *testing.T) {
	bin := chromium(t)
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	_, routerPort, _ := net.SplitHostPort(strings.TrimPrefix(e.Stack.RouterURL, "http://"))
	api := "http://api.localhost:" + routerPort // Chromium resolves *.localhost to loopback

	reports := make(chan map[string]any, 1)
	var once sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			b, _ := io.ReadAll(r.Body)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			once.Lock()
			select {
			case reports <- m:
			default:
			}
			once.Unlock()
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, page, api, p.ClientAppID, p.ClientToken)
	}))
	defer srv.Close()
	_, pagePort, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	allowed := "http://shop.localhost:" + pagePort
	putSettings(t, e, p, map[string]any{"client_trusted_domains": []string{allowed},
		"client_ip_rate_limit": map[string]any{"requests": 100000, "seconds": 1}})
	if r := e.Do(t, "POST", "http://api.localhost/management/v1/projects/"+p.ID+"/custom-event-schemas", e.MgmtHeader(),
		map[string]any{"name": "page_view", "schema": map[string]any{"properties": map[string]any{}}}); r.Status != 200 {
		t.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	stacktest.Eventually(t, 5*time.Second, "the settings and schema in force", func() bool {
		return e.Do(t, "POST", stacktest.URL("api", "/client/v1/events"), p.ClientHeader(allowed),
			map[string]any{"event": "page_view", "customer": map[string]any{"source_id": "probe"}}).Status == 200
	})

	visit := func(url string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--no-first-run", "--no-proxy-server", "--disable-extensions", "--user-data-dir="+t.TempDir(), url)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("chromium: %v", err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		select {
		case m := <-reports:
			return m
		case <-time.After(45 * time.Second):
			t.Fatalf("no report from %s; chromium said: %s", url, stderr.String())
			return nil
		}
	}
	got := visit(allowed + "/")
	ev, _ := got["events"].(map[string]any)
	q, _ := got["qualifications"].(map[string]any)
	if ev["status"] != float64(200) || ev["type"] != "page_view" || ev["customer"] != "ann" || ev["remaining"] == nil ||
		q["status"] != float64(200) || !strings.Contains(fmt.Sprint(q["keys"]), "redeemables") {
		t.Fatalf("the page from %s: %v", allowed, got)
	}
	refused := "http://evil.localhost:" + pagePort
	got = visit(refused + "/")
	for _, call := range []string{"events", "qualifications"} {
		r, _ := got[call].(map[string]any)
		if blocked, _ := r["blocked"].(string); !strings.Contains(blocked, "Failed to fetch") {
			t.Fatalf("the page's %s from %s was not blocked: %v", call, refused, got)
		}
	}
}
