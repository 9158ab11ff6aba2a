package router

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

// edge is a router reduced to its forwarder, in front of one upstream.
type edge struct {
	fwd      *forwarder
	upstream *url.URL
	url      string
	client   *http.Client
}

func newEdge(t *testing.T, upstream *httptest.Server) *edge {
	t.Helper()
	u, _ := url.Parse(upstream.URL)
	g := &edge{fwd: newForwarder(500 * time.Millisecond), upstream: u}
	e := httpx.New(httpx.Config{Service: "router-test", Log: slog.New(slog.DiscardHandler)})
	e.Any("/*", func(c echo.Context) error {
		return g.fwd.forward(c, u, "upstream", "identity", clientAddr{ip: "127.0.0.1"}, "")
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	g.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return g
}

func (g *edge) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, g.url+path, r)
	res, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (g *edge) pool() *connPool { return g.fwd.pool(g.upstream.Host) }

// countingUpstream answers every request with its body, counting requests by
// method and path.
type countingUpstream struct {
	mu   sync.Mutex
	seen map[string]int
}

func (u *countingUpstream) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[key]
}

func (u *countingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen[r.Method+" "+r.URL.Path]++
	u.mu.Unlock()
	w.Write(b)
}

func TestAPostAfterTheUpstreamClosedAnIdleConnectionIsProcessedOnce(t *testing.T) {
	up := &countingUpstream{seen: map[string]int{}}
	srv := httptest.NewUnstartedServer(up)
	srv.Config.IdleTimeout = 200 * time.Millisecond // the services' 120 s, shortened
	srv.Start()
	t.Cleanup(srv.Close)
	g := newEdge(t, srv) // the router's own idle timeout left at its default

	if st, body := g.do(t, "POST", "/v1/customers", `{"source_id":"a"}`); st != 200 || body != `{"source_id":"a"}` {
		t.Fatalf("first POST: %d %s", st, body)
	}
	time.Sleep(500 * time.Millisecond)                              // the upstream closes the kept-alive connection
	for method, want := range map[string]int{"POST": 2, "PUT": 1} { // the first POST, then this one
		st, body := g.do(t, method, "/v1/customers", `{"source_id":"b"}`)
		if st != 200 || body != `{"source_id":"b"}` {
			t.Fatalf("%s after the upstream's idle timeout: %d %s", method, st, body)
		}
		if n := up.count(method + " /v1/customers"); n != want {
			t.Fatalf("%s processed %d times", method, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestThePoolClosesIdleConnectionsBeforeTheUpstreamDoes(t *testing.T) {
	if idleConnTimeout >= httpx.ServerIdleTimeout {
		t.Fatalf("router idle timeout %v is not below the services' %v", idleConnTimeout, httpx.ServerIdleTimeout)
	}
	var opened, closed atomic.Int32
	srv := httptest.NewUnstartedServer(&countingUpstream{seen: map[string]int{}})
	srv.Config.IdleTimeout = 10 * time.Second
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	g := newEdge(t, srv)
	g.pool().idleTimeout = 150 * time.Millisecond

	if st, _ := g.do(t, "GET", "/a", ""); st != 200 {
		t.Fatal(st)
	}
	if st, _ := g.do(t, "GET", "/a", ""); st != 200 || opened.Load() != 1 {
		t.Fatalf("a connection idle for less than the timeout is reused: %d, %d opened", st, opened.Load())
	}
	// With no request at all, the sweep closes it, long before the upstream would.
	deadline := time.Now().Add(2 * time.Second)
	for closed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if closed.Load() != 1 {
		t.Fatalf("the idle connection was not closed by the router (%d closed)", closed.Load())
	}
	if st, _ := g.do(t, "GET", "/a", ""); st != 200 || opened.Load() != 2 {
		t.Fatalf("after the idle timeout a new connection is dialled: %d, %d opened", st, opened.Load())
	}

	// On get too: a connection past the timeout is closed, not used, even
	// before the sweep comes round.
	p := g.pool()
	p.mu.Lock()
	for _, c := range p.idle {
		c.idleSince = time.Now().Add(-time.Second)
	}
	p.mu.Unlock()
	if st, _ := g.do(t, "GET", "/a", ""); st != 200 || opened.Load() != 3 {
		t.Fatalf("an expired connection was reused: %d, %d opened", st, opened.Load())
	}
}

// breakingUpstream counts each request, and on the first of each method and
// path closes the connection after reading it, before answering: the request
// reached the upstream (and may have been processed), the answer is lost.
func breakingUpstream(t *testing.T) (*httptest.Server, *countingUpstream) {
	up := &countingUpstream{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			return
		}
		b, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.Path
		up.mu.Lock()
		up.seen[key]++
		n := up.seen[key]
		up.mu.Unlock()
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, up
}

func TestAPostThatReachedTheUpstreamIsNotSentAgain(t *testing.T) {
	srv, up := breakingUpstream(t)
	g := newEdge(t, srv)
	for _, body := range []string{"", `{"reason":"x"}`} {
		path := "/v1/loyalties/l/transactions/t/rollback" + map[bool]string{true: "-body"}[body != ""]
		if st, _ := g.do(t, "GET", "/warm", ""); st != 200 { // a kept-alive connection to reuse
			t.Fatal(st)
		}
		st, b := g.do(t, "POST", path, body)
		if st != http.StatusBadGateway && st != http.StatusServiceUnavailable {
			t.Fatalf("POST %s: %d %s, want the upstream error", path, st, b)
		}
		if n := up.count("POST " + path); n != 1 {
			t.Fatalf("POST %s reached the upstream %d times", path, n)
		}
	}
}

func TestAnIdempotentRequestThatReachedTheUpstreamIsRetriedOnce(t *testing.T) {
	srv, up := breakingUpstream(t)
	g := newEdge(t, srv)
	for _, tc := range []struct{ method, body string }{
		{"GET", ""}, {"DELETE", ""}, {"PUT", `{"name":"b"}`}, {"PUT", strings.Repeat("x", 40<<10)},
	} {
		path := "/v1/thing-" + tc.method + "-" + string(rune('0'+len(tc.body)%10))
		if st, _ := g.do(t, "GET", "/warm", ""); st != 200 {
			t.Fatal(st)
		}
		st, b := g.do(t, tc.method, path, tc.body)
		if st != 200 || b != tc.body {
			t.Fatalf("%s %s: %d (%d bytes), want 200 and the same body", tc.method, path, st, len(b))
		}
		if n := up.count(tc.method + " " + path); n != 2 {
			t.Fatalf("%s %s reached the upstream %d times, want 2", tc.method, path, n)
		}
	}
}

// brokenConn is a kept-alive connection that fails every write with nothing
// written, as one the upstream closed may do.
type brokenConn struct{ net.Conn }

func (brokenConn) Write([]byte) (int, error) { return 0, net.ErrClosed }

func TestARequestThatFailedBeforeAnyByteWasSentIsRetriedWhateverItsMethod(t *testing.T) {
	up := &countingUpstream{seen: map[string]int{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	g := newEdge(t, srv)
	for _, method := range []string{"POST", "PATCH"} {
		a, b := net.Pipe()
		b.Close()
		w := &wireCounter{Conn: brokenConn{a}}
		c := &upConn{Conn: a, br: bufioReader(a), bw: bufioWriter(w), wire: w}
		g.pool().put(c)
		st, body := g.do(t, method, "/v1/customers", `{"source_id":"c"}`)
		if st != 200 || body != `{"source_id":"c"}` {
			t.Fatalf("%s: %d %s", method, st, body)
		}
		if n := up.count(method + " /v1/customers"); n != 1 {
			t.Fatalf("%s processed %d times", method, n)
		}
	}
}

func bufioReader(c net.Conn) *bufio.Reader  { return bufio.NewReaderSize(c, 16<<10) }
func bufioWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 16<<10) }

// An idempotent request on a connection used moments ago is written without
// first checking that the upstream still holds it (peekAfter): when the
// upstream has closed it meanwhile, the retry answers it, processed once.
func TestAGetOnAConnectionTheUpstreamJustClosedIsAnsweredOnce(t *testing.T) {
	up := &countingUpstream{seen: map[string]int{}}
	srv := httptest.NewUnstartedServer(up)
	srv.Config.IdleTimeout = 100 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	g := newEdge(t, srv)
	if st, _ := g.do(t, "GET", "/warm", ""); st != 200 {
		t.Fatal(st)
	}
	time.Sleep(300 * time.Millisecond) // closed by the upstream, idle for less than peekAfter
	for _, method := range []string{"GET", "DELETE"} {
		if st, _ := g.do(t, method, "/v1/thing", ""); st != 200 {
			t.Fatalf("%s on a connection the upstream closed: %d", method, st)
		}
		if n := up.count(method + " /v1/thing"); n != 1 {
			t.Fatalf("%s processed %d times", method, n)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
