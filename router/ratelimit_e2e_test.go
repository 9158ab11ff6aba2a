package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/tenancy"
)

// sdkHeaders reads the limit headers as the official SDK does: lower-case
// names, integers.
func sdkHeaders(t *testing.T, h http.Header) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for k, vs := range h {
		switch name := strings.ToLower(k); name {
		case "x-rate-limit-limit", "x-rate-limit-remaining", "x-rate-limit-retry", "retry-after":
			n, err := strconv.ParseInt(vs[0], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q is not an integer", name, vs[0])
			}
			out[name] = n
		}
	}
	return out
}

// clientFrom sends from a loopback address of its own (127.0.0.x).
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// The client-side API's per-address limit: 5 requests per 5 seconds, the
// sixth refused with the interface's body and the limit headers; another
// address unaffected; X-Forwarded-For believed only from a trusted proxy.
func TestClientSideRequestsAreLimitedPerAddress(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	p := e.CreateProject(t, "api")
	key := e.Do(t, "POST", "http://api.localhost/management/v1/projects/"+p.ID+"/api-keys", e.MgmtHeader(),
		map[string]any{"kind": "client"}).JSON(t)
	e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(),
		map[string]any{"client_trusted_domains": []string{"https://shop.example"}})
	send := func(client *http.Client, forwardedFor string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.Stack.BaseURL("api")+"/client/v1/ping", nil)
		req.Header.Set("Origin", "https://shop.example")
		req.Header.Set("X-Client-Application-Id", key["app_id"].(string))
		req.Header.Set("X-Client-Token", key["app_token"].(string))
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	direct, proxy := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	// A direct client's X-Forwarded-For is not believed: each claims
	// another address, and all share 127.0.0.1's bucket.
	for i := range 5 {
		if res := send(direct, fmt.Sprintf("203.0.113.%d", i+1)); res.StatusCode == 429 {
			t.Fatalf("request %d of 5 refused", i+1)
		}
	}
	res := send(direct, "203.0.113.99")
	body, _ := io.ReadAll(res.Body)
	var m map[string]any
	if res.StatusCode != 429 || json.Unmarshal(body, &m) != nil {
		t.Fatalf("the sixth: %d %s", res.StatusCode, body)
	}
	if m["code"] != float64(429) || m["message"] != "Too many requests hit the API too quickly." || m["key"] != "too_many_requests" ||
		!strings.HasPrefix(fmt.Sprint(m["request_id"]), "v-") || len(m) != 4 {
		t.Fatalf("the 429's body: %s", body)
	}
	h := sdkHeaders(t, res.Header)
	if h["retry-after"] < 1 || h["x-rate-limit-limit"] != 5 || h["x-rate-limit-remaining"] != 0 ||
		h["x-rate-limit-retry"] < time.Now().Unix() || res.Header.Get("RateLimit-Policy") != `"client";q=5;w=5` {
		t.Fatalf("the 429's headers: %v %v", h, res.Header)
	}
	// Through a trusted proxy the forwarded address counts: its own bucket.
	for i := range 5 {
		if res := send(proxy, "198.51.100.7"); res.StatusCode == 429 {
			t.Fatalf("198.51.100.7's request %d refused", i+1)
		}
	}
	if res := send(proxy, "198.51.100.7"); res.StatusCode != 429 {
		t.Fatalf("198.51.100.7's sixth: %d", res.StatusCode)
	}
	if res := send(proxy, "198.51.100.8"); res.StatusCode == 429 {
		t.Fatal("another address behind the proxy was refused")
	}
	// The application API is not limited per address.
	for range 10 {
		if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil); r.Status != 200 {
			t.Fatalf("application API: %d", r.Status)
		}
	}
}

// Three router replicas share nothing but the tenancy database; one client
// sends ten times a project's per-minute limit through them within twelve
// seconds of one minute's window. The replicas together accept no more than the limit and, short
// of their last leases, all of it; two clients under their limits see no
// refusal. Every answer carries the limit headers.
func TestAProjectLimitHoldsAcrossThreeRouters(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	const limit = 60
	if r := e.Do(t, "PUT", "http://api.localhost/management/v1/plans/metered", e.MgmtHeader(),
		map[string]any{"requests_per_minute": limit}); r.Status != 200 {
		t.Fatalf("plan: %d %s", r.Status, r.Body)
	}
	var projects []stacktest.Project
	for range 3 {
		p := e.CreateProject(t, "api")
		if r := e.Do(t, "PUT", "http://api.localhost/management/v1/projects/"+p.ID, e.MgmtHeader(),
			map[string]any{"plan": "metered"}); r.Status != 200 {
			t.Fatalf("plan of a project: %d %s", r.Status, r.Body)
		}
		projects = append(projects, p)
	}
	routers := []string{e.Stack.RouterURL}
	for range 2 {
		u, err := e.Stack.StartRouter()
		if err != nil {
			t.Fatal(err)
		}
		routers = append(routers, u)
	}
	// Twelve seconds inside one minute's window: now, if the minute has
	// that long left, else from a second after the next minute starts.
	const window = 12 * time.Second
	start := time.Now()
	if into := start.Sub(start.Truncate(time.Minute)); into < time.Second || into > time.Minute-window-time.Second {
		start = start.Truncate(time.Minute).Add(time.Minute + time.Second)
		time.Sleep(time.Until(start))
	}
	end := start.Add(window)

	type tally struct{ ok, refused, other int }
	var mu sync.Mutex
	counts := make([]tally, 3)
	var wg sync.WaitGroup
	run := func(who int, every time.Duration) {
		defer wg.Done()
		client := &http.Client{Timeout: 10 * time.Second}
		p := projects[who]
		for i := 0; time.Now().Before(end); i++ {
			req, _ := http.NewRequestWithContext(context.Background(), "GET", routers[i%3]+"/v1/customers", nil)
			req.Host = "api.localhost"
			req.Header = p.Header()
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			h := res.Header
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mu.Lock()
			switch res.StatusCode {
			case 200:
				counts[who].ok++
			case 429:
				counts[who].refused++
			default:
				counts[who].other++
			}
			mu.Unlock()
			if h.Get("X-Rate-Limit-Limit") != strconv.Itoa(limit) || h.Get("RateLimit") == "" {
				t.Errorf("answer %d without the limit headers: %v", res.StatusCode, h)
				return
			}
			time.Sleep(every)
		}
	}
	wg.Add(3)
	go run(0, window/(10*limit))    // ten times the limit
	go run(1, 400*time.Millisecond) // 30 in the window
	go run(2, 300*time.Millisecond) // 40
	wg.Wait()
	over, a, b := counts[0], counts[1], counts[2]
	t.Logf("over the limit: %d accepted, %d refused; under it: %+v %+v", over.ok, over.refused, a, b)
	if over.ok > limit || over.ok < limit-3*3 || over.refused == 0 || over.other != 0 {
		t.Fatalf("the client over its limit: %+v, want at most %d accepted and no fewer than %d", over, limit, limit-9)
	}
	// Each under-limit client sends what it can in the window (30 and 40
	// on an idle machine, fewer on a busy one); at least ten each, so
	// that none refused means something.
	if a.refused != 0 || b.refused != 0 || a.other != 0 || b.other != 0 || a.ok < 10 || b.ok < 10 {
		t.Fatalf("clients under their limits: %+v %+v", a, b)
	}
}

// An address that keeps naming keys, tokens or hosts that do not exist
// costs the directory a query each time until its budget is spent; then it
// is answered 429 with no query, while its own cached key still works and
// another address is unaffected.
func TestLookupsOfNamesThatDoNotExistAreBudgetedPerAddress(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	// The directory poll evicts what changed in the last WatchLookback
	// again and again: the new project's key is cached after that.
	time.Sleep(tenancy.WatchLookback + 500*time.Millisecond)
	misses := e.Stack.Resolver.Misses
	type answer struct {
		status int
		header http.Header
		body   map[string]any
	}
	send := func(client *http.Client, host string, h http.Header) answer {
		t.Helper()
		req, _ := http.NewRequest("GET", e.Stack.RouterURL+"/v1/customers", nil)
		req.Host = host
		req.Header = h
		res, err := client.Do(req)
		if err != nil {
			t.Error(err) // from the flood's goroutines too
			return answer{}
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return answer{res.StatusCode, res.Header, body}
	}
	unknownKey := func(i int) http.Header {
		return http.Header{"X-App-Id": {fmt.Sprintf("app_nosuch_%d_%d", i, time.Now().UnixNano())}, "X-App-Token": {"x"}}
	}
	attacker, other := clientFrom("127.0.0.3"), clientFrom("127.0.0.4")
	if a := send(attacker, "api.localhost", p.Header()); a.status != 200 {
		t.Fatalf("the attacker's own key: %d", a.status)
	}
	// 240 unknown keys from 24 connections at once: lookups under way
	// count against the budget, so concurrency cannot overdraw it.
	before, start := misses(), time.Now()
	var mu sync.Mutex
	refused := 0
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				a := send(attacker, "api.localhost", unknownKey(g*10+i))
				switch a.status {
				case 401: // a lookup of the budget (50, then one per 100 ms)
				case 429:
					if a.header.Get("Retry-After") != "1" || a.body["code"] != float64(429) || a.body["key"] != "too_many_requests" ||
						a.body["message"] != "Too many requests hit the API too quickly." {
						t.Errorf("refused with %v %v", a.header, a.body)
					}
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("%d %v", a.status, a.body)
				}
			}
		}()
	}
	wg.Wait()
	// 50 at once, then 10 a second: every other request was answered
	// without reading the directory.
	allowed := 50 + 10*time.Since(start).Seconds() + 1
	if got := float64(misses() - before); got < 50 || got > allowed {
		t.Fatalf("240 unknown keys read the directory %v times, want 50 to %.0f", got, allowed)
	}
	if refused < 240-int(allowed) {
		t.Fatalf("%d of 240 refused", refused)
	}
	// Unknown hosts and Bearer tokens draw on the same budget: of 40
	// different names sent at once, only those the refill (one per 100 ms)
	// paid for are looked up. Each name is new: a name already looked up
	// is answered from the router's memory of names that do not exist,
	// budget or not, so one name sent 20 times proves nothing.
	spent := func(what string, req func(i int) (string, http.Header)) {
		const n = 40
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range statuses {
			wg.Add(1)
			go func() { defer wg.Done(); host, h := req(i); statuses[i] = send(attacker, host, h).status }()
		}
		wg.Wait()
		refused := 0
		for _, s := range statuses {
			if s == 429 {
				refused++
			} else if s < 400 || s >= 500 {
				t.Errorf("%s with the budget spent: %d", what, s)
			}
		}
		if paid := int(10*time.Since(start).Seconds()) + 1; refused < n-paid {
			t.Errorf("%s with the budget spent: %d of %d refused 429 in %v, want at least %d (%v)", what, refused, n, time.Since(start), n-paid, statuses)
		}
	}
	stamp := time.Now().UnixNano()
	spent("an unknown host", func(i int) (string, http.Header) {
		return fmt.Sprintf("nosuch%d-%d.api.localhost", stamp, i), p.Header()
	})
	spent("an unknown Bearer token", func(i int) (string, http.Header) {
		return "api.localhost", http.Header{"Authorization": {fmt.Sprintf("Bearer nosuch_%d_%d", stamp, i)}}
	})
	if a := send(attacker, "api.localhost", p.Header()); a.status != 200 {
		t.Errorf("the attacker's own cached key with the budget spent: %d %v", a.status, a.body)
	}
	if a := send(other, "api.localhost", unknownKey(-1)); a.status != 401 {
		t.Errorf("another address's unknown key: %d %v", a.status, a.body)
	}
	if a := send(other, "api.localhost", p.Header()); a.status != 200 {
		t.Errorf("another address's key: %d %v", a.status, a.body)
	}
}
