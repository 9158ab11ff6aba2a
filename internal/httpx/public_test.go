package httpx

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startPublic serves a handler that reads the body and answers "ok".
func startPublic(t *testing.T, o PublicOptions) string {
	t.Helper()
	return StartPublic(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), o)
}

// closedWithin reads c until the server closes it and returns how long that took.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, _ = io.Copy(io.Discard, c) // a 408 the server may write, then EOF
	took := time.Since(start)
	if took >= limit {
		t.Fatalf("the connection was still open after %s", limit)
	}
	return took
}

// A client that stalls in its headers, or drips them a byte at a time, or
// stalls in its body, is cut off at the deadline, which dripping does not
// move.
func TestStalledClientsAreClosedAtTheDeadlines(t *testing.T) {
	addr := startPublic(t, PublicOptions{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	stalled := dial()
	_, _ = io.WriteString(stalled, "GET / HTTP/1.1\r\nHost: api.localhost\r\n")
	if took := closedWithin(t, stalled, 3*time.Second); took < 250*time.Millisecond {
		t.Fatalf("closed after %s, before the 300 ms header deadline", took)
	}

	drip := dial()
	go func() {
		for _, b := range []byte("GET / HTTP/1.1\r\nHost: api.localhost\r\nX-Slow: ") {
			if _, err := drip.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	closedWithin(t, drip, 2*time.Second) // the whole line would take 2.3 s

	body := dial()
	_, _ = io.WriteString(body, "POST / HTTP/1.1\r\nHost: api.localhost\r\nContent-Length: 100\r\n\r\nonly part")
	closedWithin(t, body, 3*time.Second)

	// A prompt client is served.
	res, err := http.Get("http://" + addr + "/")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a prompt request: %v %v", res, err)
	}
	res.Body.Close()
}

// One address holds at most MaxConnsPerIP connections; the next is closed
// as soon as accepted and counted, and a slot freed is usable again.
// Exempt addresses (trusted proxies) are not capped.
func TestConnectionsPerAddressAreCapped(t *testing.T) {
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	addr := startPublic(t, PublicOptions{MaxConnsPerIP: 3, Refused: refused})
	open := func() (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		// A request answered on it shows the server accepted it.
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			return nil, err
		}
		res.Body.Close()
		return c, nil
	}
	var held []net.Conn
	for i := range 3 {
		c, err := open()
		if err != nil {
			t.Fatalf("connection %d of 3: %v", i+1, err)
		}
		held = append(held, c)
	}
	if c, err := open(); err == nil {
		c.Close()
		t.Fatal("a fourth connection from one address was served")
	}
	if n := testutil.ToFloat64(refused); n != 1 {
		t.Fatalf("%v refusals counted, want 1", n)
	}
	held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := open()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a freed slot was not usable again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	exempt := startPublic(t, PublicOptions{MaxConnsPerIP: 1, Exempt: func(a netip.Addr) bool { return a.IsLoopback() }})
	for i := range 3 {
		c, err := net.Dial("tcp", exempt)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		b, _ := bufio.NewReader(c).ReadString('\n')
		if !strings.HasPrefix(b, "HTTP/1.1 200") {
			t.Fatalf("exempt connection %d: %q", i+1, b)
		}
	}
}

// fakeListener hands out pipe connections that seem to come from addrs.
type fakeListener struct {
	addrs chan string
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func (l *fakeListener) Accept() (net.Conn, error) {
	a, ok := <-l.addrs
	if !ok {
		return nil, net.ErrClosed
	}
	c, _ := net.Pipe()
	return addrConn{Conn: c, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))}, nil
}
func (l *fakeListener) Close() error   { return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// An IPv6 client holds a whole /64 and may connect from any address of
// it: the cap is the /64's. Another /64 has its own.
func TestTheConnectionCapHoldsAnIPv6ClientsWholeSlash64(t *testing.T) {
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	in := &fakeListener{addrs: make(chan string, 8)}
	l := &perIPListener{Listener: in, max: 2, refused: refused, open: map[netip.Addr]int{}}
	for _, a := range []string{"[2001:db8:1:2::1]:1000", "[2001:db8:1:2::2]:1000", "[2001:db8:1:2:abcd::9]:1000",
		"[2001:db8:1:3::1]:1000"} {
		in.addrs <- a
	}
	close(in.addrs)
	var got []string
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		defer c.Close()
		got = append(got, c.RemoteAddr().String())
	}
	if len(got) != 3 || testutil.ToFloat64(refused) != 1 || got[2] != "[2001:db8:1:3::1]:1000" {
		t.Fatalf("accepted %v with %v refused; want the third of 2001:db8:1:2::/64 refused", got, testutil.ToFloat64(refused))
	}
}
